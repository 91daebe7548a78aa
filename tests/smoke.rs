use tourbillon::task::yield_now;
use tourbillon::Builder;

#[test]
fn spawn_yield_join() {
    let ex = Builder::new().queue(0u8, 1).queue(1u8, 3).build().unwrap();
    let out = ex.block_on(async {
        let mut hs = vec![];
        for i in 0..100u64 {
            hs.push(
                ex.spawn((i % 2) as u8, async move {
                    for _ in 0..5 {
                        yield_now().await;
                    }
                    i
                })
                .unwrap(),
            );
        }
        let mut s = 0;
        for h in hs {
            s += h.await.unwrap();
        }
        s
    });
    assert_eq!(out, 4950);
    let st = ex.stats();
    assert_eq!(st.live_tasks, 0);
    assert_eq!(st.polls, 600);
}
