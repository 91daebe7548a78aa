use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

use tourbillon::pool::{Placement, Pool};

thread_local! {
    // Each core's shard: !Send state, touched only on its own core.
    static SHARD: RefCell<HashMap<u64, u64>> = RefCell::new(HashMap::new());
}

fn main() {
    let pool = Pool::builder()
        .cores(2)
        .placement(Placement::Unpinned) // EachCpu pins core i to CPU i
        .executor(|_core| {
            tourbillon::Builder::new()
                .queue("requests", 8)
                .queue("background", 1)
        })
        .build()
        .unwrap();
    futures::executor::block_on(async {
        for key in 0..100u64 {
            // A Send closure; the future it builds runs on the key's core.
            let core = (key % 2) as usize;
            let put = move || async move { SHARD.with(|s| s.borrow_mut().insert(key, key * key)) };
            pool.submit_to(core, "requests", put).await.unwrap();
        }
        let stats = pool.stats().await.merged().unwrap();
        println!("tasks on all cores: {}", stats.queues[0].spawned);
    });
    print!("{}", pool.shutdown(Duration::from_secs(1)).unwrap());
}
