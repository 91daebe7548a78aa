//! The `tracing` feature: a `run` span per run and a `poll` span per task
//! poll, with queue and task fields (`cargo test --features tracing`).
#![cfg(feature = "tracing")]

use std::sync::{Arc, Mutex};

use tourbillon::task::yield_now;
use tourbillon::Builder;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// A span's name and its fields as (name, value) pairs.
type SpanRecord = (String, Vec<(String, String)>);

/// Records the name and fields of every span created.
#[derive(Default, Clone)]
struct Recorder {
    spans: Arc<Mutex<Vec<SpanRecord>>>,
}

struct Fields(Vec<(String, String)>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .push((field.name().to_string(), format!("{value:?}")));
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut fields = Fields(Vec::new());
        span.record(&mut fields);
        let mut spans = self.spans.lock().unwrap();
        spans.push((span.metadata().name().to_string(), fields.0));
        Id::from_u64(spans.len() as u64)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn a_span_per_run_and_per_poll_with_queue_and_task() {
    let rec = Recorder::default();
    let spans = rec.spans.clone();
    tracing::subscriber::with_default(rec, || {
        let ex = Builder::new()
            .queue("fg", 1)
            .queue("bg", 1)
            .build()
            .unwrap();
        let a = ex
            .spawn("fg", async {
                yield_now().await;
            })
            .unwrap();
        let b = ex.spawn("bg", async {}).unwrap();
        let (ida, idb) = (a.id(), b.id());
        ex.block_on(async {
            a.await.unwrap();
            b.await.unwrap();
        });
        let spans = spans.lock().unwrap();
        let polls: Vec<_> = spans.iter().filter(|(n, _)| n == "poll").collect();
        // Task a: 2 polls (one yield), task b: 1.
        assert_eq!(polls.len(), 3, "{spans:?}");
        let task_polls = |id: tourbillon::task::TaskId| {
            polls
                .iter()
                .filter(|(_, f)| f.contains(&("task".into(), id.to_string())))
                .count()
        };
        assert_eq!(task_polls(ida), 2);
        assert_eq!(task_polls(idb), 1);
        assert!(polls
            .iter()
            .all(|(_, f)| f.iter().any(|(k, _)| k == "queue")));
        let runs: Vec<_> = spans.iter().filter(|(n, _)| n == "run").collect();
        assert!(runs
            .iter()
            .any(|(_, f)| f.contains(&("queue".into(), "\"fg\"".into()))));
        assert!(runs
            .iter()
            .any(|(_, f)| f.contains(&("queue".into(), "\"bg\"".into()))));
    });
}
