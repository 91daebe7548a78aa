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
    // README.md is rendered by GitHub and read in a clone, which do not
    // resolve rustdoc's intra-doc links; API items are named in `code`
    // (the reference is `cargo doc --open`), and the crate is not on
    // docs.rs, whose links would not resolve.
    for (n, line) in README.lines().enumerate() {
        assert!(
            !line.contains("](crate::") && !line.contains("]: crate::"),
            "README.md line {}: a rustdoc-only link: {line}",
            n + 1
        );
        assert!(
            !line.contains("docs.rs/"),
            "README.md line {}: a docs.rs link: {line}",
            n + 1
        );
    }
}

/// Every relative link of the README (`](path)` or `](path#anchor)`)
/// names a file or directory of the repository.
#[test]
fn readme_relative_links_resolve() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut rest = README;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let target = &rest[..rest.find(')').expect("a link is closed")];
        if target.starts_with("http") || target.starts_with('#') {
            continue;
        }
        let path = target.split('#').next().unwrap_or(target);
        assert!(
            root.join(path).exists(),
            "README.md links to {target:?}, which does not exist"
        );
    }
}

/// The set-up commands a newcomer runs in a bare clone: the quick start
/// and the tests, in a ```` ```sh ```` block of the Install section.
#[test]
fn readme_gives_the_demo_and_test_commands() {
    let install = &README[README.find("\n## Install\n").expect("an Install section")..];
    let block = &install[install.find("\n```sh\n").expect("a ```sh block in Install") + 7..];
    let block = &block[..block.find("\n```\n").expect("the block is closed")];
    let lines: Vec<&str> = block.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("cargo run --example quick_start")),
        "{block}"
    );
    assert!(lines.iter().any(|l| l.starts_with("cargo test")), "{block}");
}
