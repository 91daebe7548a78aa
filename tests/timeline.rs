//! The timeline of polls (`Builder::timeline`, `Executor::take_timeline`,
//! `tourbillon::timeline`): exact records of a small scenario on the
//! virtual clock (two queues, known shares and poll costs), the buffer's
//! bound and its count of dropped polls, and the Chrome trace-event JSON
//! (parsed here by a small JSON reader).

use std::time::Duration;

use tourbillon::clock::ManualClock;
use tourbillon::task::yield_now;
use tourbillon::timeline::{write_chrome_json, Timeline};
use tourbillon::Builder;

const POLL: Duration = Duration::from_micros(20);

/// Two queues, `fg` with 2 shares and `bg` with 1, slices of 100 us; one
/// named task in each makes `polls` polls of 20 us (the virtual clock
/// advances in the polls only). Returns the timeline of a buffer of
/// `capacity` polls.
fn scenario(polls: u32, capacity: usize) -> Timeline {
    let clock = ManualClock::new();
    let ex = Builder::new()
        .queue("fg", 2)
        .queue("bg", 1)
        .base_slice(Duration::from_micros(100))
        .clock(clock.clone())
        .timeline(capacity)
        .build()
        .unwrap();
    let mut tasks = Vec::new();
    for (queue, name) in [("fg", "front"), ("bg", "back")] {
        let c = clock.clone();
        let task = ex
            .task(queue)
            .name(name)
            .spawn(async move {
                for _ in 0..polls {
                    c.advance(POLL);
                    yield_now().await;
                }
            })
            .unwrap();
        tasks.push(task);
    }
    ex.run_until_stalled();
    assert!(tasks.iter().all(|t| t.is_finished()));
    ex.take_timeline().unwrap()
}

#[test]
fn records_every_poll_with_its_queue_task_and_times() {
    let t = scenario(12, 1000);
    assert_eq!(t.dropped(), 0);
    assert_eq!(t.queue_names(), ["\"fg\"", "\"bg\""]);
    // 13 polls per task: 12 that advance the clock, and the last one that
    // completes without advancing it.
    let polls = t.polls();
    assert_eq!(polls.len(), 26);
    // Each poll starts where the one before ended: the clock moves only in
    // polls, and the recorder's times are the executor's per-poll readings.
    let mut at = 0;
    for p in polls {
        assert_eq!(p.start_ns, at, "{p:?}");
        at += p.duration_ns;
    }
    // Who held the thread, poll by poll ('f' fg, 'b' bg), as EEVDF picked:
    // runs of several polls, fg's first (the first queue declared).
    let order: String = polls
        .iter()
        .map(|p| if p.queue == 0 { 'f' } else { 'b' })
        .collect();
    assert_eq!(order, "fffbbbffffbbbbbffffffbbbbb");
    // The names and the queues agree; the runs group consecutive polls.
    for p in polls {
        let name = if p.queue == 0 { "front" } else { "back" };
        assert_eq!(p.name.as_deref(), Some(name));
    }
    // Busy time per queue: 12 polls of 20 us each.
    assert_eq!(t.busy_ns(), [240_000, 240_000]);
    let runs: Vec<u64> = polls.iter().map(|p| p.run).collect();
    assert!(runs.windows(2).all(|w| w[0] <= w[1]), "{runs:?}");
}

#[test]
fn a_full_buffer_counts_the_dropped_polls() {
    let clock = ManualClock::new();
    let ex = Builder::new()
        .queue("q", 1)
        .clock(clock.clone())
        .timeline(4)
        .build()
        .unwrap();
    let c = clock.clone();
    let first = ex
        .spawn("q", async move {
            for _ in 0..9 {
                c.advance(POLL);
                yield_now().await;
            }
        })
        .unwrap();
    ex.run_until_stalled();
    assert!(first.is_finished());
    let t = ex.take_timeline().unwrap();
    // The first four polls are kept, the other six counted.
    assert_eq!((t.polls().len(), t.dropped()), (4, 6));
    assert_eq!(t.polls()[3].start_ns, 60_000);
    // Taken: a new, empty buffer of the same size.
    let t = ex.take_timeline().unwrap();
    assert_eq!((t.polls().len(), t.dropped()), (0, 0));
    let c = clock.clone();
    let second = ex
        .spawn("q", async move {
            for _ in 0..5 {
                c.advance(POLL);
                yield_now().await;
            }
        })
        .unwrap();
    ex.run_until_stalled();
    assert!(second.is_finished());
    let t = ex.take_timeline().unwrap();
    assert_eq!((t.polls().len(), t.dropped()), (4, 2));
    assert_eq!(t.polls()[0].start_ns, 180_000);
    let mut json = Vec::new();
    t.write_chrome_json(&mut json).unwrap();
    let json = String::from_utf8(json).unwrap();
    assert!(json.contains("\"labels\":\"2 polls dropped (buffer full)\""));
    assert!(json.contains("\"dropped_polls\":\"2\""));
}

#[test]
fn without_a_timeline_there_is_none() {
    let ex = Builder::new().queue("q", 1).build().unwrap();
    assert!(ex.take_timeline().is_none());
    let err = Builder::new()
        .queue("q", 1)
        .timeline(tourbillon::timeline::MAX_TIMELINE_POLLS + 1)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("timeline"), "{err}");
}

#[test]
fn the_chrome_trace_is_well_formed_json_with_a_row_per_queue() {
    let mut t = scenario(2, 1000);
    t.set_label("main \"executor\"");
    let mut out = Vec::new();
    t.write_chrome_json(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let json = Json::parse(&text);
    let events = json.get("traceEvents").unwrap().array();
    // Metadata: the process (its name, escaped) and a row per queue.
    let meta: Vec<(String, u64, String)> = events
        .iter()
        .filter(|e| e.get("ph").unwrap().str() == "M")
        .filter(|e| e.get("name").unwrap().str().ends_with("_name"))
        .map(|e| {
            (
                e.get("name").unwrap().str().to_string(),
                e.get("tid").unwrap().num() as u64,
                e.get("args")
                    .unwrap()
                    .get("name")
                    .unwrap()
                    .str()
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(
        meta,
        [
            ("process_name".into(), 0, "main \"executor\"".into()),
            ("thread_name".into(), 1, "\"fg\"".into()),
            ("thread_name".into(), 2, "\"bg\"".into()),
        ]
    );
    // Complete events: each poll, inside the run that holds it, on its
    // queue's row; times in microseconds from the first poll.
    let complete: Vec<(String, String, u64, f64, f64)> = events
        .iter()
        .filter(|e| e.get("ph").unwrap().str() == "X")
        .map(|e| {
            (
                e.get("cat").unwrap().str().to_string(),
                e.get("name").unwrap().str().to_string(),
                e.get("tid").unwrap().num() as u64,
                e.get("ts").unwrap().num(),
                e.get("dur").unwrap().num(),
            )
        })
        .collect();
    let polls = complete.iter().filter(|e| e.0 == "poll").count();
    assert_eq!(polls, t.polls().len());
    // Two polls of 20 us and a last one of none per task, fg's run first.
    let expected = [
        "run run \"fg\" 1 0 40",
        "poll front 1 0 20",
        "poll front 1 20 20",
        "poll front 1 40 0",
        "run run \"bg\" 2 40 40",
        "poll back 2 40 20",
        "poll back 2 60 20",
        "poll back 2 80 0",
    ];
    let got: Vec<String> = complete
        .iter()
        .map(|(cat, name, tid, ts, dur)| format!("{cat} {name} {tid} {ts} {dur}"))
        .collect();
    assert_eq!(got, expected);
    assert_eq!(
        json.get("otherData")
            .unwrap()
            .get("dropped_polls")
            .unwrap()
            .str(),
        "0"
    );
    // Two timelines in one file: two processes.
    let mut out = Vec::new();
    write_chrome_json(&[t.clone(), t], &mut out).unwrap();
    let json = Json::parse(std::str::from_utf8(&out).unwrap());
    let pids: std::collections::BTreeSet<u64> = json
        .get("traceEvents")
        .unwrap()
        .array()
        .iter()
        .map(|e| e.get("pid").unwrap().num() as u64)
        .collect();
    assert_eq!(pids.into_iter().collect::<Vec<_>>(), [1, 2]);
}

/// A JSON value, as far as the test reads it.
#[derive(Debug)]
enum Json {
    /// `true`, `false` or `null`.
    Literal,
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// Parses `text`, which must be one JSON value and nothing else.
    fn parse(text: &str) -> Json {
        let b = text.as_bytes();
        let mut i = 0;
        let v = Self::value(b, &mut i);
        Self::ws(b, &mut i);
        assert_eq!(i, b.len(), "trailing text after the JSON value");
        v
    }

    fn ws(b: &[u8], i: &mut usize) {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    }

    fn eat(b: &[u8], i: &mut usize, c: u8) {
        Self::ws(b, i);
        assert_eq!(b[*i] as char, c as char, "at byte {i}");
        *i += 1;
    }

    fn value(b: &[u8], i: &mut usize) -> Json {
        Self::ws(b, i);
        match b[*i] {
            b'{' => {
                *i += 1;
                let mut fields = Vec::new();
                Self::ws(b, i);
                if b[*i] == b'}' {
                    *i += 1;
                    return Json::Obj(fields);
                }
                loop {
                    Self::ws(b, i);
                    let Json::Str(k) = Self::value(b, i) else {
                        panic!("a key that is not a string at byte {i}");
                    };
                    Self::eat(b, i, b':');
                    fields.push((k, Self::value(b, i)));
                    Self::ws(b, i);
                    *i += 1;
                    match b[*i - 1] {
                        b',' => continue,
                        b'}' => return Json::Obj(fields),
                        c => panic!("{} at byte {i}", c as char),
                    }
                }
            }
            b'[' => {
                *i += 1;
                let mut items = Vec::new();
                Self::ws(b, i);
                if b[*i] == b']' {
                    *i += 1;
                    return Json::Arr(items);
                }
                loop {
                    items.push(Self::value(b, i));
                    Self::ws(b, i);
                    *i += 1;
                    match b[*i - 1] {
                        b',' => continue,
                        b']' => return Json::Arr(items),
                        c => panic!("{} at byte {i}", c as char),
                    }
                }
            }
            b'"' => {
                *i += 1;
                let mut s = String::new();
                loop {
                    let c = b[*i];
                    *i += 1;
                    match c {
                        b'"' => return Json::Str(s),
                        b'\\' => {
                            let e = b[*i];
                            *i += 1;
                            s.push(match e {
                                b'"' => '"',
                                b'\\' => '\\',
                                b'/' => '/',
                                b'n' => '\n',
                                b'r' => '\r',
                                b't' => '\t',
                                b'u' => {
                                    let hex = std::str::from_utf8(&b[*i..*i + 4]).unwrap();
                                    *i += 4;
                                    char::from_u32(u32::from_str_radix(hex, 16).unwrap()).unwrap()
                                }
                                e => panic!("escape \\{}", e as char),
                            });
                        }
                        c if c < 0x20 => panic!("a control character in a string"),
                        _ => {
                            // The rest of a UTF-8 sequence goes in whole.
                            let start = *i - 1;
                            let mut end = *i;
                            while end < b.len() && (b[end] & 0xC0) == 0x80 {
                                end += 1;
                            }
                            s.push_str(std::str::from_utf8(&b[start..end]).unwrap());
                            *i = end;
                        }
                    }
                }
            }
            b't' | b'f' | b'n' => {
                for word in ["true", "false", "null"] {
                    if b[*i..].starts_with(word.as_bytes()) {
                        *i += word.len();
                        return Json::Literal;
                    }
                }
                panic!("a bad literal at byte {i}");
            }
            _ => {
                let start = *i;
                while *i < b.len()
                    && matches!(b[*i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    *i += 1;
                }
                let n = std::str::from_utf8(&b[start..*i]).unwrap();
                Json::Num(n.parse().unwrap_or_else(|_| panic!("a bad number {n:?}")))
            }
        }
    }

    fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn array(&self) -> &[Json] {
        match self {
            Json::Arr(a) => a,
            v => panic!("not an array: {v:?}"),
        }
    }

    fn str(&self) -> &str {
        match self {
            Json::Str(s) => s,
            v => panic!("not a string: {v:?}"),
        }
    }

    fn num(&self) -> f64 {
        match self {
            Json::Num(n) => *n,
            v => panic!("not a number: {v:?}"),
        }
    }
}
