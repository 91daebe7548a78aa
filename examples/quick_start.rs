use tourbillon::task::yield_now;
use tourbillon::Builder;

// Queues are named by any `Copy + Eq + Hash + Debug` key, typically an enum.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Queue {
    Requests,
    Compaction,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // While both queues have work, requests get 4/5 of the thread and
    // compaction 1/5. A queue with nothing to run leaves its time to the other.
    let ex = Builder::new()
        .queue(Queue::Requests, 4)
        .queue(Queue::Compaction, 1)
        .build()?;

    // The main future is not a task and belongs to no queue: the driver polls
    // it between the tasks' turns. `tourbillon::spawn` here would use the
    // default queue, the first declared (Requests; see Builder::default_queue).
    let total = ex.block_on(async {
        let compaction = ex.spawn(Queue::Compaction, async {
            for _chunk in 0..100 {
                // ... compact one chunk ...
                yield_now().await; // let the executor decide who runs next
            }
            "compaction done"
        })?;

        let mut requests = Vec::new();
        for id in 0..10u64 {
            requests.push(ex.spawn(Queue::Requests, async move {
                // A task can spawn onto its own queue, like tokio's `spawn_local`.
                let lookup = tourbillon::spawn(async move { id * 2 });
                lookup.await.unwrap_or(0)
            })?);
        }

        let mut total = 0;
        for request in requests {
            total += request.await?; // a JoinHandle gives Result<T, JoinError>
        }
        println!("{}", compaction.await?);
        Ok::<u64, Box<dyn std::error::Error>>(total)
    })?;

    println!("sum of the answers: {total}");
    print!("{}", ex.stats()); // per queue: spawned, completed, polls, service, ...
    Ok(())
}
