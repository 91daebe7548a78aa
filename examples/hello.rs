//! The smallest program: one queue, one task, await its output.
//!
//! ```text
//! cargo run --example hello
//! ```

use tourbillon::Builder;

fn main() {
    let ex = Builder::new().queue("main", 1).build().unwrap();
    let greeting = ex.block_on(async {
        let task = ex.spawn("main", async { "hello from a tourbillon task" });
        task.unwrap().await.unwrap()
    });
    println!("{greeting}");
}
