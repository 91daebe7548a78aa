//! The README's quick start is `examples/quick_start.rs` and its
//! many-cores example `examples/pool.rs`, word for word, so the code a
//! reader copies from the README is code that compiles and runs (`cargo
//! run --example quick_start`, `--example pool`).

const README: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"));
const QUICK_START: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/quick_start.rs"
));

/// The body of the first ```` ```rust ```` block after the heading `heading`.
fn code_block_after<'a>(markdown: &'a str, heading: &str) -> &'a str {
    let section = markdown
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("README.md has no heading {heading:?}"));
    first_code_block(&markdown[section..], heading)
}

/// The body of the first ```` ```rust ```` block of `rest` (which follows
/// `what`, for the messages).
fn first_code_block<'a>(rest: &'a str, what: &str) -> &'a str {
    let open = "\n```rust\n";
    let start = rest
        .find(open)
        .unwrap_or_else(|| panic!("no ```rust block after {what:?}"))
        + open.len();
    let len = rest[start..]
        .find("\n```\n")
        .expect("the ```rust block is not closed")
        + 1;
    &rest[start..start + len]
}

#[test]
fn readme_quick_start_is_the_example() {
    let block = code_block_after(README, "## Quick start");
    assert!(
        block == QUICK_START,
        "the README's quick start differs from examples/quick_start.rs; \
         paste the example into the README's ```rust block.\n\
         --- README ---\n{block}\n--- examples/quick_start.rs ---\n{QUICK_START}"
    );
}

const POOL: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/pool.rs"));

#[test]
fn readme_pool_example_is_the_example() {
    let block = code_block_after(README, "## Many cores");
    assert!(
        block == POOL,
        "the README's pool example differs from examples/pool.rs\n\
         --- README ---\n{block}\n--- examples/pool.rs ---\n{POOL}"
    );
}

#[test]
fn readme_links_work_outside_rustdoc() {
    // README.md is rendered by GitHub and crates.io, which do not resolve
    // rustdoc's intra-doc links; API items link to docs.rs instead.
    for (n, line) in README.lines().enumerate() {
        assert!(
            !line.contains("](crate::") && !line.contains("]: crate::"),
            "README.md line {}: a rustdoc-only link: {line}",
            n + 1
        );
    }
}
