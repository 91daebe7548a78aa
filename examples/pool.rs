use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

use tourbillon::pool::{Placement, Pool};
use tourbillon::Builder;

thread_local! {
    // Each core's shard: plain !Send state, touched only on its core.
    static SHARD: RefCell<HashMap<u64, u64>> = RefCell::new(HashMap::new());
}

fn main() {
    let pool = Pool::builder()
        .cores(2)
        .placement(Placement::Unpinned) // Placement::EachCpu pins core i to CPU i
        .executor(|_core| Builder::new().queue("requests", 8).queue("background", 1))
        .build()
        .unwrap();
    let cores = pool.cores() as u64;
    futures::executor::block_on(async {
        for key in 0..100u64 {
            // The closure is Send; the future it builds runs on the key's core.
            let shard = (key % cores) as usize;
            pool.submit_to(shard, "requests", move || async move {
                SHARD.with(|s| s.borrow_mut().insert(key, key * key));
            })
            .await
            .unwrap();
        }
        let sizes: Vec<usize> = futures::future::join_all((0..pool.cores()).map(|core| {
            pool.submit_to(core, "requests", || async {
                SHARD.with(|s| s.borrow().len())
            })
        }))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
        println!("keys per core: {sizes:?}");
        let stats = pool.stats().await.merged().unwrap();
        println!("tasks spawned on all cores: {}", stats.queues[0].spawned);
    });
    let report = pool.shutdown(Duration::from_secs(1)).unwrap();
    print!("{report}");
}
