//! Backpressure on spawns from another thread: a producer thread spawns
//! 1,000 tasks through a `BoundedRemoteSpawner` of capacity 256, waiting
//! for room whenever 256 of them wait for their first poll, while the
//! executor runs them.
//!
//! ```text
//! cargo run --example bounded_remote
//! ```

use std::num::NonZeroUsize;
use tourbillon::Builder;

fn main() {
    let ex = Builder::new().queue("jobs", 1).build().unwrap();
    // At most 256 of its tasks wait for their first poll at any time.
    let tx = ex.bounded_remote_spawner(NonZeroUsize::new(256).unwrap());
    let producer = std::thread::spawn(move || {
        futures::executor::block_on(async {
            let mut handles = Vec::new();
            for i in 0..1_000u64 {
                // Waits while the spawner is full.
                handles.push(tx.spawn("jobs", async move { i }).await.unwrap());
            }
            handles
        })
    });
    let sum = ex.block_on(async move {
        // Runs the executor's tasks while the producer waits for room.
        while !producer.is_finished() {
            tourbillon::task::yield_now().await;
        }
        let mut sum = 0;
        for h in producer.join().unwrap() {
            sum += h.await.unwrap();
        }
        sum
    });
    assert_eq!(sum, 499_500);
    println!("1,000 tasks spawned from another thread, 256 at most waiting: sum {sum}");
}
