//! The layers of `src/`, checked against the list in docs/architecture.md,
//! so that the document cannot drift from the code.
//!
//! # The list
//!
//! docs/architecture.md ("## Layers") holds one fenced block whose info
//! string is `text layers`: one line per layer, from the top layer to the
//! bottom, `name: path, path, ...`. A path is a file (`src/lib.rs`) or a
//! folder (`src/pool/`: every `.rs` file under it). Only that block is
//! read; the picture, the table and the prose around it are not.
//!
//! # The rules (one `#[test]` each)
//!
//! * `every_file_in_exactly_one_layer`: every `.rs` file under `src/`
//!   belongs to exactly one layer, and every path of the list exists;
//! * `no_upward_import`: a file imports files of its own layer or of lower
//!   layers, never a file of a higher layer;
//! * `no_import_circle`: no circle of imports among the files of a layer
//!   (a circle through several layers holds an upward import, which
//!   `no_upward_import` reports).
//!
//! # What an import is
//!
//! File F imports file G when F's code names a module whose items are
//! written in G. The names counted are the paths that start with `crate::`
//! (or `$crate::`), `super::` or `self::`, and the paths whose first segment
//! is a module in scope by name (a child module declared with `mod`, or a
//! module brought in by a `use`, as lib.rs's `pub use executor::...`), in
//! `use` items (grouped, nested, spread over lines, `pub use`, inside
//! functions) and inline in expressions, types and patterns
//! (`crate::boundary::call(...)`). Comments (`//`, `///`, `//!`, `/* */`),
//! string and character literals, attributes (`#[...]`) and visibilities
//! (`pub(in crate::x)`) are not code, and a `mod x;` declaration is not an
//! import.
//!
//! `#[cfg(test)]` modules count as code of their file: what they import,
//! the file imports. Their `use super::*` names the file's own module, and
//! a file importing itself is no import.
//!
//! # How a path finds its file
//!
//! Paths resolve through the module tree as rustc builds it from the `mod`
//! declarations, starting at src/lib.rs: `mod x;` in a module whose
//! directory is D loads D/x.rs or D/x/mod.rs (the directory of a.rs's module
//! is a/, that of mod.rs or lib.rs their own folder), `#[path = "..."]` is
//! obeyed (a file loaded so is treated like a mod.rs), and an inline
//! `mod x { ... }` is a module whose items are written in the file that
//! holds it, and whose own `mod y;` loads D/x/y.rs. So
//! `pub mod task { pub(crate) mod harness; }` in lib.rs makes
//! `crate::task::harness` src/task/harness.rs. `super::` and `self::`
//! start at the module of the code that names them.
//!
//! A path resolves to the deepest module it names: `crate::a::b::C`, with
//! `C` a type, is module `crate::a::b`. A path in code (not in a `use`)
//! ends with an item, so its last segment is never taken for a module:
//! `crate::yield_now()` calls the function that lib.rs re-exports, not the
//! module `yield_now`. A module named through a re-export
//! (`pub use crate::m::n;` with `n` a module, or a glob `pub use crate::m::*`
//! that brings module `n`) is that module; an item named through a
//! re-export stays with the module that re-exports it: `crate::task::JoinSet`,
//! where `task` is an inline module of lib.rs re-exporting `JoinSet`, is an
//! import of src/lib.rs.
//!
//! # Re-exports and circles
//!
//! For the circle check only, a re-export (a `pub` or `pub(...)` `use`
//! whose name the file's code does not use otherwise, or a `pub` glob) is
//! not an import of the file that writes it: it passes the name on, as a
//! folder's mod.rs does for its private files. In exchange, an import of an
//! item through a re-export (`super::raw::RawTask`, re-exported by
//! raw/mod.rs from raw/cell.rs) is also an import of the file the item
//! comes from. The upward check counts every import as written.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::fs;
use std::path::Path;

// ---------------------------------------------------------------------
// Lexing: Rust source to tokens, without comments; literals kept apart.
// ---------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    /// An identifier or keyword (`$crate` is lexed as `crate`; a raw
    /// identifier keeps its `r#`).
    Ident(String),
    /// A string literal's text as written between its quotes.
    Str(String),
    /// A number, a character literal, a lifetime or a label.
    Other,
    /// `::`
    PathSep,
    Punct(char),
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    line: usize,
}

fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn is_ident_char(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

fn lex(src: &str) -> Vec<Token> {
    let c: Vec<char> = src.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        let start_line = line;
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 1;
            i += 2;
            while i < c.len() && depth > 0 {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                } else {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if ch == '"' {
            let (text, next) = quoted(&c, i + 1, &mut line);
            out.push(Token {
                tok: Tok::Str(text),
                line: start_line,
            });
            i = next;
        } else if ch == '\'' {
            // A character literal ('a', '\n', '\u{..}') or a lifetime/label.
            if at(i + 1) == '\\' {
                i += 3;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
                while i < c.len() && is_ident_char(c[i]) {
                    i += 1;
                }
            }
            out.push(Token {
                tok: Tok::Other,
                line: start_line,
            });
        } else if ch.is_ascii_digit() {
            while i < c.len()
                && (is_ident_char(c[i]) || (c[i] == '.' && at(i + 1).is_ascii_digit()))
            {
                i += 1;
            }
            out.push(Token {
                tok: Tok::Other,
                line: start_line,
            });
        } else if is_ident_start(ch) {
            // Prefixed literals first: r"..", r#".."#, b"..", br"..", c"..",
            // cr"..", b'.'; then raw identifiers (r#x), then identifiers.
            let prefix_len = match (ch, at(i + 1)) {
                ('b' | 'c', 'r') => 2,
                ('r', _) => 1,
                _ => 0,
            };
            if prefix_len > 0 {
                let mut j = i + prefix_len;
                let mut hashes = 0;
                while at(j) == '#' {
                    hashes += 1;
                    j += 1;
                }
                if at(j) == '"' {
                    j += 1;
                    let text_start = j;
                    loop {
                        if j >= c.len() {
                            break;
                        }
                        if c[j] == '"' && (1..=hashes).all(|k| at(j + k) == '#') {
                            break;
                        }
                        if c[j] == '\n' {
                            line += 1;
                        }
                        j += 1;
                    }
                    let text: String = c[text_start..j.min(c.len())].iter().collect();
                    out.push(Token {
                        tok: Tok::Str(text),
                        line: start_line,
                    });
                    i = j + 1 + hashes;
                    continue;
                }
            }
            if (ch == 'b' || ch == 'c') && at(i + 1) == '"' {
                let (text, next) = quoted(&c, i + 2, &mut line);
                out.push(Token {
                    tok: Tok::Str(text),
                    line: start_line,
                });
                i = next;
                continue;
            }
            if ch == 'b' && at(i + 1) == '\'' {
                i += 1; // the character literal is lexed next round
                continue;
            }
            let mut j = i;
            if ch == 'r' && at(i + 1) == '#' && is_ident_start(at(i + 2)) {
                j += 2;
            }
            while j < c.len() && is_ident_char(c[j]) {
                j += 1;
            }
            out.push(Token {
                tok: Tok::Ident(c[i..j].iter().collect()),
                line: start_line,
            });
            i = j;
        } else if ch == '$'
            && c[i + 1..].starts_with(&['c', 'r', 'a', 't', 'e'])
            && !is_ident_char(at(i + 6))
        {
            out.push(Token {
                tok: Tok::Ident("crate".to_string()),
                line: start_line,
            });
            i += 6;
        } else if ch == ':' && at(i + 1) == ':' {
            out.push(Token {
                tok: Tok::PathSep,
                line: start_line,
            });
            i += 2;
        } else {
            out.push(Token {
                tok: Tok::Punct(ch),
                line: start_line,
            });
            i += 1;
        }
    }
    out
}

/// The text of a quoted literal from `i` (just after the opening quote) to
/// the closing quote, and the index after that quote.
fn quoted(c: &[char], mut i: usize, line: &mut usize) -> (String, usize) {
    let start = i;
    while i < c.len() && c[i] != '"' {
        if c[i] == '\\' {
            i += 1;
        }
        if i < c.len() && c[i] == '\n' {
            *line += 1;
        }
        i += 1;
    }
    let end = i.min(c.len());
    (c[start..end].iter().collect(), i + 1)
}

// ---------------------------------------------------------------------
// Parsing one file: its inline modules, `mod` declarations and paths.
// ---------------------------------------------------------------------

/// A module written in a file: index 0 is the file's own module, the others
/// are its inline `mod x { ... }` blocks.
#[derive(Debug)]
struct LocalMod {
    parent: usize,
    name: String,
    /// `mod x;` declarations: name and `#[path]`.
    decls: Vec<(String, Option<String>)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum RefKind {
    /// A leaf of a `use` tree: the name it brings (`None` for `as _`), and
    /// whether it is a glob.
    Use { name: Option<String>, glob: bool },
    /// A path in code.
    Inline,
}

/// A path as written, in local module `module`.
#[derive(Clone, Debug)]
struct PathRef {
    module: usize,
    segs: Vec<String>,
    /// Starts with `::` (an extern crate).
    absolute: bool,
    kind: RefKind,
    /// A leaf of a `pub` (or `pub(...)`) `use`.
    public: bool,
    line: usize,
}

#[derive(Debug)]
struct FileSyntax {
    mods: Vec<LocalMod>,
    refs: Vec<PathRef>,
    /// The identifiers of the file's code outside `use` items.
    used: BTreeSet<String>,
    /// Whether its braces balance (else the lexer misread something).
    balanced: bool,
}

impl FileSyntax {
    /// Whether `r` is a re-export: a `pub use` leaf whose name the file's
    /// code does not use (it only passes the name on), or a `pub use` glob.
    fn is_reexport(&self, r: &PathRef) -> bool {
        match &r.kind {
            RefKind::Use { name, glob } => {
                r.public && (*glob || name.as_ref().is_some_and(|n| !self.used.contains(n)))
            }
            RefKind::Inline => false,
        }
    }
}

fn ident(t: Option<&Token>) -> Option<&str> {
    match t.map(|t| &t.tok) {
        Some(Tok::Ident(s)) => Some(s),
        _ => None,
    }
}

fn is_punct(t: Option<&Token>, p: char) -> bool {
    matches!(t.map(|t| &t.tok), Some(Tok::Punct(q)) if *q == p)
}

fn is_sep(t: Option<&Token>) -> bool {
    matches!(t.map(|t| &t.tok), Some(Tok::PathSep))
}

/// The index of the bracket closing the one at `open`.
fn closing(toks: &[Token], open: usize) -> usize {
    let (o, c) = match toks[open].tok {
        Tok::Punct('(') => ('(', ')'),
        Tok::Punct('[') => ('[', ']'),
        _ => ('{', '}'),
    };
    let mut depth = 0;
    for (k, t) in toks.iter().enumerate().skip(open) {
        match t.tok {
            Tok::Punct(p) if p == o => depth += 1,
            Tok::Punct(p) if p == c => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    toks.len()
}

fn parse(src: &str) -> FileSyntax {
    let toks = lex(src);
    let mut f = FileSyntax {
        mods: vec![LocalMod {
            parent: 0,
            name: String::new(),
            decls: Vec::new(),
        }],
        refs: Vec::new(),
        used: BTreeSet::new(),
        balanced: true,
    };
    // Open inline modules: (local module, brace depth inside it).
    let mut open: Vec<(usize, usize)> = Vec::new();
    let mut depth = 0;
    let mut path_attr: Option<String> = None;
    // The index of the token after the last `pub` or `pub(...)`.
    let mut after_pub = usize::MAX;
    let mut i = 0;
    while i < toks.len() {
        let module = open.last().map_or(0, |o| o.0);
        match &toks[i].tok {
            Tok::Punct('#') => {
                let mut j = i + 1;
                if is_punct(toks.get(j), '!') {
                    j += 1;
                }
                if is_punct(toks.get(j), '[') {
                    let end = closing(&toks, j);
                    if let [Token {
                        tok: Tok::Ident(p), ..
                    }, Token {
                        tok: Tok::Punct('='),
                        ..
                    }, Token {
                        tok: Tok::Str(s), ..
                    }] = &toks[j + 1..end.min(toks.len())]
                    {
                        if p == "path" {
                            path_attr = Some(s.clone());
                        }
                    }
                    i = end + 1;
                } else {
                    i += 1;
                }
            }
            Tok::Ident(k) if k == "pub" => {
                // `pub(crate)`, `pub(super)`, `pub(in crate::x)`: no import.
                i = if is_punct(toks.get(i + 1), '(') {
                    closing(&toks, i + 1) + 1
                } else {
                    i + 1
                };
                after_pub = i;
            }
            Tok::Ident(k) if k == "mod" && ident(toks.get(i + 1)).is_some() => {
                let name = ident(toks.get(i + 1)).unwrap_or_default().to_string();
                if is_punct(toks.get(i + 2), '{') {
                    f.mods.push(LocalMod {
                        parent: module,
                        name,
                        decls: Vec::new(),
                    });
                    depth += 1;
                    open.push((f.mods.len() - 1, depth));
                    path_attr = None;
                    i += 3;
                } else {
                    f.mods[module].decls.push((name, path_attr.take()));
                    i += 2;
                }
            }
            Tok::Ident(k) if k == "use" && !is_punct(toks.get(i + 1), '<') => {
                let mut prefix = Vec::new();
                let first = f.refs.len();
                let public = after_pub == i;
                i = use_tree(&toks, i + 1, &mut prefix, false, module, &mut f.refs);
                for r in &mut f.refs[first..] {
                    r.public = public;
                }
                while i < toks.len() && !is_punct(toks.get(i), ';') {
                    i += 1;
                }
            }
            Tok::Ident(first)
                if is_sep(toks.get(i + 1)) && !is_sep(toks.get(i.wrapping_sub(1))) =>
            {
                let mut segs = vec![first.clone()];
                let mut j = i + 1;
                let mut line = toks[i].line;
                while is_sep(toks.get(j)) {
                    match ident(toks.get(j + 1)) {
                        Some(s) => {
                            segs.push(s.to_string());
                            line = toks[j + 1].line;
                            j += 2;
                        }
                        None => break,
                    }
                }
                f.used.extend(segs.iter().cloned());
                if segs.len() > 1 {
                    f.refs.push(PathRef {
                        module,
                        segs,
                        absolute: false,
                        kind: RefKind::Inline,
                        public: false,
                        line,
                    });
                }
                i = j;
            }
            Tok::PathSep => {
                // `::std::x` (extern), or `Foo::<T>::x` (a continuation):
                // skip the identifiers that follow.
                i += 1;
                while let Some(s) = ident(toks.get(i)) {
                    f.used.insert(s.to_string());
                    i += 1;
                    if !is_sep(toks.get(i)) {
                        break;
                    }
                    i += 1;
                }
            }
            Tok::Punct('{') => {
                depth += 1;
                path_attr = None;
                i += 1;
            }
            Tok::Punct('}') => {
                if open.last().is_some_and(|o| o.1 == depth) {
                    open.pop();
                }
                depth = depth.saturating_sub(1);
                path_attr = None;
                i += 1;
            }
            Tok::Punct(';') => {
                path_attr = None;
                i += 1;
            }
            Tok::Ident(s) => {
                f.used.insert(s.clone());
                i += 1;
            }
            _ => i += 1,
        }
    }
    f.balanced = depth == 0 && open.is_empty();
    f
}

/// Parses a `use` tree from `i`; pushes one `PathRef` per leaf; returns the
/// index after the tree.
fn use_tree(
    toks: &[Token],
    mut i: usize,
    prefix: &mut Vec<String>,
    mut absolute: bool,
    module: usize,
    out: &mut Vec<PathRef>,
) -> usize {
    let base = prefix.len();
    if prefix.is_empty() && is_sep(toks.get(i)) {
        absolute = true;
        i += 1;
    }
    loop {
        match toks.get(i).map(|t| &t.tok) {
            Some(Tok::Ident(s)) => {
                prefix.push(s.clone());
                let line = toks[i].line;
                i += 1;
                if is_sep(toks.get(i)) {
                    i += 1;
                    continue;
                }
                let mut segs = prefix.clone();
                // `a::{self}` is `a`.
                if segs.len() > 1 && segs.last().is_some_and(|s| s == "self") {
                    segs.pop();
                }
                let mut name = segs.last().cloned();
                if ident(toks.get(i)) == Some("as") {
                    name = ident(toks.get(i + 1))
                        .filter(|a| *a != "_")
                        .map(str::to_string);
                    i += 2;
                }
                out.push(PathRef {
                    module,
                    segs,
                    absolute,
                    kind: RefKind::Use { name, glob: false },
                    public: false,
                    line,
                });
                break;
            }
            Some(Tok::Punct('*')) => {
                out.push(PathRef {
                    module,
                    segs: prefix.clone(),
                    absolute,
                    kind: RefKind::Use {
                        name: None,
                        glob: true,
                    },
                    public: false,
                    line: toks[i].line,
                });
                i += 1;
                break;
            }
            Some(Tok::Punct('{')) => {
                i += 1;
                while i < toks.len() && !is_punct(toks.get(i), '}') {
                    let before = i;
                    i = use_tree(toks, i, prefix, absolute, module, out);
                    if is_punct(toks.get(i), ',') {
                        i += 1;
                    } else if i == before {
                        i += 1; // unexpected token: step over it
                    }
                }
                i += 1;
                break;
            }
            _ => break,
        }
    }
    prefix.truncate(base);
    i
}

// ---------------------------------------------------------------------
// The module tree and path resolution.
// ---------------------------------------------------------------------

#[derive(Debug)]
struct Module {
    parent: Option<usize>,
    /// The file its items are written in.
    file: String,
    /// Where its `mod x;` children are looked for.
    dir: String,
    children: BTreeMap<String, usize>,
    /// Its `use` leaves.
    uses: Vec<UseLeaf>,
}

#[derive(Debug)]
struct UseLeaf {
    segs: Vec<String>,
    absolute: bool,
    /// The name it brings (`None` for a glob or `as _`).
    name: Option<String>,
    glob: bool,
}

/// One import of a file on another.
#[derive(Clone, Debug)]
struct Import {
    from: String,
    to: String,
    line: usize,
    /// The path as written.
    path: String,
    /// A re-export of the importing file (`FileSyntax::is_reexport`).
    reexport: bool,
    /// When `to` is where an item re-exported by another file comes from:
    /// that file (the one the path names, which is an import of its own).
    via: Option<String>,
}

#[derive(Debug)]
struct Crate {
    files: BTreeMap<String, String>,
    modules: Vec<Module>,
    /// Each loaded file's syntax and the global module of each of its
    /// local modules.
    loaded: BTreeMap<String, (FileSyntax, Vec<usize>)>,
    /// `mod` declarations whose file is missing.
    problems: Vec<String>,
}

fn parent_dir(path: &str) -> String {
    match path.rfind('/') {
        Some(k) => path[..k].to_string(),
        None => String::new(),
    }
}

/// `dir` joined with `rel`, with `.` and `..` folded.
fn join(dir: &str, rel: &str) -> String {
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for p in rel.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            _ => parts.push(p),
        }
    }
    parts.join("/")
}

impl Crate {
    /// Builds the module tree from `root` (`src/lib.rs`) over `files`
    /// (path relative to the package, with `/`, to text).
    fn build(files: BTreeMap<String, String>, root: &str) -> Crate {
        let mut krate = Crate {
            files,
            modules: vec![Module {
                parent: None,
                file: root.to_string(),
                dir: parent_dir(root),
                children: BTreeMap::new(),
                uses: Vec::new(),
            }],
            loaded: BTreeMap::new(),
            problems: Vec::new(),
        };
        let mut queue = VecDeque::from([(root.to_string(), 0)]);
        while let Some((file, top)) = queue.pop_front() {
            if krate.loaded.contains_key(&file) {
                continue;
            }
            let Some(text) = krate.files.get(&file) else {
                continue;
            };
            let syntax = parse(text);
            if !syntax.balanced {
                krate.problems.push(format!(
                    "{file}: its braces do not balance as tests/layers.rs reads them"
                ));
            }
            let mut global = vec![top];
            for m in syntax.mods.iter().skip(1) {
                let parent = global[m.parent];
                let id = krate.add_child(
                    parent,
                    &m.name,
                    &file,
                    join(&krate.modules[parent].dir, &m.name),
                );
                global.push(id);
            }
            for (local, m) in syntax.mods.iter().enumerate() {
                let here = global[local];
                for (name, attr) in &m.decls {
                    let dir = krate.modules[here].dir.clone();
                    let (path, child_dir) = match attr {
                        Some(p) => {
                            let base = if local == 0 { parent_dir(&file) } else { dir };
                            let path = join(&base, p);
                            let child_dir = parent_dir(&path);
                            (path, child_dir)
                        }
                        None => {
                            let flat = join(&dir, &format!("{name}.rs"));
                            let nested = join(&dir, &format!("{name}/mod.rs"));
                            if krate.files.contains_key(&flat) {
                                (flat, join(&dir, name))
                            } else if krate.files.contains_key(&nested) {
                                (nested, join(&dir, name))
                            } else {
                                krate.problems.push(format!(
                                    "{file}: `mod {name};` but neither {flat} nor {nested} exists"
                                ));
                                continue;
                            }
                        }
                    };
                    if !krate.files.contains_key(&path) {
                        krate.problems.push(format!(
                            "{file}: `mod {name};` names {path}, which does not exist"
                        ));
                        continue;
                    }
                    let id = krate.add_child(here, name, &path, child_dir);
                    queue.push_back((path, id));
                }
            }
            for r in &syntax.refs {
                if let RefKind::Use { name, glob } = &r.kind {
                    krate.modules[global[r.module]].uses.push(UseLeaf {
                        segs: r.segs.clone(),
                        absolute: r.absolute,
                        name: name.clone(),
                        glob: *glob,
                    });
                }
            }
            krate.loaded.insert(file, (syntax, global));
        }
        krate
    }

    fn add_child(&mut self, parent: usize, name: &str, file: &str, dir: String) -> usize {
        self.modules.push(Module {
            parent: Some(parent),
            file: file.to_string(),
            dir,
            children: BTreeMap::new(),
            uses: Vec::new(),
        });
        let id = self.modules.len() - 1;
        self.modules[parent].children.insert(name.to_string(), id);
        id
    }

    /// The module that `name` means inside module `m`: a child, or a module
    /// brought in by a `use` (named or glob).
    fn lookup(&self, m: usize, name: &str, depth: usize) -> Option<usize> {
        if depth > 8 {
            return None;
        }
        if let Some(&c) = self.modules[m].children.get(name) {
            return Some(c);
        }
        for u in &self.modules[m].uses {
            if u.glob {
                if let Some(t) = self.resolve_full(m, &u.segs, u.absolute, depth + 1) {
                    if t != m {
                        if let Some(x) = self.lookup(t, name, depth + 1) {
                            return Some(x);
                        }
                    }
                }
            } else if u.name.as_deref() == Some(name) {
                if let Some(t) = self.resolve_full(m, &u.segs, u.absolute, depth + 1) {
                    return Some(t);
                }
            }
        }
        None
    }

    /// The files an item `name` of module `m` comes from when `m` only
    /// re-exports it (`pub use x::y::Name;`), following re-exports of
    /// re-exports: nearest first.
    fn origins(&self, m: usize, name: &str, depth: usize, out: &mut Vec<String>) {
        if depth > 8 {
            return;
        }
        for u in &self.modules[m].uses {
            if u.glob || u.name.as_deref() != Some(name) || u.segs.len() < 2 {
                continue;
            }
            let (item, prefix) = u.segs.split_last().expect("two segments");
            if let Some((o, n)) = self.walk(m, prefix, u.absolute, depth + 1) {
                if n == prefix.len() && o != m {
                    out.push(self.modules[o].file.clone());
                    self.origins(o, item, depth + 1, out);
                }
            }
            return;
        }
    }

    /// Walks `segs` from module `from`: the deepest module reached and how
    /// many segments named modules; `None` when the path is not the
    /// crate's (an extern crate, a local item, a type parameter...).
    fn walk(
        &self,
        from: usize,
        segs: &[String],
        absolute: bool,
        depth: usize,
    ) -> Option<(usize, usize)> {
        if absolute || segs.is_empty() {
            return None;
        }
        let mut cur = match segs[0].as_str() {
            "crate" => 0,
            "self" => from,
            "super" => self.modules[from].parent?,
            name => self.lookup(from, name, depth)?,
        };
        let mut n = 1;
        for s in &segs[1..] {
            let next = match s.as_str() {
                "super" => self.modules[cur].parent,
                "self" => Some(cur),
                name => self.lookup(cur, name, depth),
            };
            match next {
                Some(m) => {
                    cur = m;
                    n += 1;
                }
                None => break,
            }
        }
        Some((cur, n))
    }

    fn resolve_full(
        &self,
        from: usize,
        segs: &[String],
        absolute: bool,
        depth: usize,
    ) -> Option<usize> {
        match self.walk(from, segs, absolute, depth) {
            Some((m, n)) if n == segs.len() => Some(m),
            _ => None,
        }
    }

    /// The file of the deepest module that `path` (`crate::a::b`) names
    /// from the top module of `file`.
    fn resolve_from(&self, file: &str, path: &str) -> Option<String> {
        let (_, global) = self.loaded.get(file)?;
        let segs: Vec<String> = path.split("::").map(str::to_string).collect();
        self.walk(global[0], &segs, false, 0)
            .map(|(m, _)| self.modules[m].file.clone())
    }

    /// Every import of one file on another, in file and line order.
    fn imports(&self) -> Vec<Import> {
        let mut out = Vec::new();
        for (file, (syntax, global)) in &self.loaded {
            for r in &syntax.refs {
                // A path in code ends with an item (`crate::a::f()`,
                // `crate::a::T`), never a module: only the segments before
                // it name modules. A `use` may end with a module.
                let segs = match r.kind {
                    RefKind::Inline => &r.segs[..r.segs.len() - 1],
                    RefKind::Use { .. } => &r.segs[..],
                };
                let Some((m, n)) = self.walk(global[r.module], segs, r.absolute, 0) else {
                    continue;
                };
                let to = &self.modules[m].file;
                let import = Import {
                    from: file.clone(),
                    to: to.clone(),
                    line: r.line,
                    path: r.segs.join("::"),
                    reexport: syntax.is_reexport(r),
                    via: None,
                };
                // The item the path names, when `m` re-exports it.
                let mut origins = Vec::new();
                if let Some(item) = r.segs.get(n) {
                    self.origins(m, item, 0, &mut origins);
                }
                for origin in origins {
                    if origin != *file && origin != *to {
                        out.push(Import {
                            to: origin,
                            via: Some(to.clone()),
                            ..import.clone()
                        });
                    }
                }
                if to != file {
                    out.push(import);
                }
            }
        }
        out.sort_by(|a, b| (&a.from, a.line, &a.to).cmp(&(&b.from, b.line, &b.to)));
        out
    }

    /// `file:line: text`, for messages.
    fn cite(&self, imp: &Import) -> String {
        let text = self
            .files
            .get(&imp.from)
            .and_then(|t| t.lines().nth(imp.line - 1))
            .unwrap_or("")
            .trim();
        match &imp.via {
            None => format!("{}:{}: {}  (`{}`)", imp.from, imp.line, text, imp.path),
            Some(via) => format!(
                "{}:{}: {}  (`{}`, re-exported by {via})",
                imp.from, imp.line, text, imp.path
            ),
        }
    }
}

// ---------------------------------------------------------------------
// The layer list of docs/architecture.md.
// ---------------------------------------------------------------------

#[derive(Debug, PartialEq, Eq)]
struct Layer {
    name: String,
    paths: Vec<String>,
}

/// The layers of the one `text layers` block of `doc`, top first.
fn parse_layers(doc: &str) -> Result<Vec<Layer>, String> {
    let mut blocks = Vec::new();
    let mut lines = doc.lines().enumerate();
    while let Some((n, line)) = lines.next() {
        let t = line.trim();
        let Some(info) = t.strip_prefix("```") else {
            continue;
        };
        let mut words = info.split_whitespace();
        let is_list = words.next() == Some("text") && words.next() == Some("layers");
        let mut layers = Vec::new();
        for (m, line) in lines.by_ref() {
            let line = line.trim();
            if line.starts_with("```") {
                break;
            }
            if !is_list || line.is_empty() {
                continue;
            }
            let (name, paths) = line.split_once(':').ok_or_else(|| {
                format!(
                    "docs/architecture.md:{}: `{line}` is not `name: path, path, ...`",
                    m + 1
                )
            })?;
            let paths: Vec<String> = paths
                .split(',')
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty())
                .collect();
            if name.trim().is_empty() || paths.is_empty() {
                return Err(format!(
                    "docs/architecture.md:{}: `{line}` needs a name and at least one path",
                    m + 1
                ));
            }
            layers.push(Layer {
                name: name.trim().to_string(),
                paths,
            });
        }
        if is_list {
            blocks.push((n + 1, layers));
        }
    }
    match blocks.len() {
        1 => Ok(blocks.pop().map(|b| b.1).unwrap_or_default()),
        0 => Err("docs/architecture.md has no ```text layers block".to_string()),
        _ => Err(format!(
            "docs/architecture.md has {} ```text layers blocks (lines {:?}); one is read",
            blocks.len(),
            blocks.iter().map(|b| b.0).collect::<Vec<_>>()
        )),
    }
}

/// Each `.rs` file's layer (index, 0 = top), and the errors of rule (a).
fn assign_layers(
    layers: &[Layer],
    files: &BTreeSet<String>,
) -> (BTreeMap<String, usize>, Vec<String>) {
    let mut errors = Vec::new();
    let mut owners: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut names = BTreeSet::new();
    for (k, layer) in layers.iter().enumerate() {
        if !names.insert(&layer.name) {
            errors.push(format!("layer `{}` is listed twice", layer.name));
        }
        for p in &layer.paths {
            let matched: Vec<&String> = if p.ends_with('/') {
                files.iter().filter(|f| f.starts_with(p.as_str())).collect()
            } else {
                files.iter().filter(|f| *f == p).collect()
            };
            if matched.is_empty() {
                errors.push(format!(
                    "layer `{}`: `{p}` does not exist (no such .rs file, or a folder without one)",
                    layer.name
                ));
            }
            for f in matched {
                owners.entry(f).or_default().push(k);
            }
        }
    }
    let mut assigned = BTreeMap::new();
    for f in files {
        match owners.get(f.as_str()).map(Vec::as_slice) {
            None | Some([]) => errors.push(format!("{f} is in no layer of the list")),
            Some([k]) => {
                assigned.insert(f.clone(), *k);
            }
            Some(ks) => errors.push(format!(
                "{f} is listed {} times, in layers {}",
                ks.len(),
                ks.iter()
                    .map(|k| format!("`{}`", layers[*k].name))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
    (assigned, errors)
}

/// Rule (b): imports of a file of a higher layer, each with its message.
fn upward_imports(
    krate: &Crate,
    layers: &[Layer],
    layer_of: &BTreeMap<String, usize>,
) -> Vec<(Import, String)> {
    let mut out = Vec::new();
    for imp in krate.imports().into_iter().filter(|i| i.via.is_none()) {
        let (Some(&from), Some(&to)) = (layer_of.get(&imp.from), layer_of.get(&imp.to)) else {
            continue;
        };
        if to < from {
            let message = format!(
                "{}\n    layer `{}` imports {} of the higher layer `{}`",
                krate.cite(&imp),
                layers[from].name,
                imp.to,
                layers[to].name
            );
            out.push((imp, message));
        }
    }
    out
}

/// Rule (c): each group of files of one layer that import each other in a
/// circle (a strongly connected component of the imports within the
/// layer), with the shortest circle through its first file and every import
/// inside it. A circle through several layers holds an import of a higher
/// layer, which `no_upward_import` reports.
fn circles(krate: &Crate, layers: &[Layer], layer_of: &BTreeMap<String, usize>) -> Vec<String> {
    let imports: Vec<Import> = krate
        .imports()
        .into_iter()
        .filter(|i| !i.reexport)
        .filter(|i| layer_of.get(&i.from).is_some() && layer_of.get(&i.from) == layer_of.get(&i.to))
        .collect();
    let files: Vec<&String> = krate.loaded.keys().collect();
    let index: BTreeMap<&String, usize> = files.iter().enumerate().map(|(k, f)| (*f, k)).collect();
    let mut succ = vec![BTreeSet::new(); files.len()];
    for imp in &imports {
        succ[index[&imp.from]].insert(index[&imp.to]);
    }
    let sccs = tarjan(&succ);
    let mut out = Vec::new();
    for scc in sccs.into_iter().filter(|s| s.len() > 1) {
        let members: BTreeSet<usize> = scc.iter().copied().collect();
        let layer = layer_of
            .get(files[scc[0]])
            .map_or("?", |k| layers[*k].name.as_str());
        let mut report = format!(
            "import circle among {} files of layer `{layer}`:\n",
            members.len()
        );
        for m in &members {
            let _ = writeln!(report, "  {}", files[*m]);
        }
        // The shortest circle from the first file back to itself.
        let start = *members.iter().next().unwrap_or(&0);
        let mut prev: BTreeMap<usize, usize> = BTreeMap::new();
        let mut queue = VecDeque::from([start]);
        let mut last = None;
        while let Some(v) = queue.pop_front() {
            for &w in &succ[v] {
                if !members.contains(&w) {
                    continue;
                }
                if w == start {
                    last = Some(v);
                    queue.clear();
                    break;
                }
                if let std::collections::btree_map::Entry::Vacant(e) = prev.entry(w) {
                    e.insert(v);
                    queue.push_back(w);
                }
            }
        }
        if let Some(mut v) = last {
            let mut path = vec![start];
            let mut back = vec![v];
            while v != start {
                v = prev[&v];
                back.push(v);
            }
            back.pop();
            back.reverse();
            path.extend(back);
            path.push(start);
            let _ = writeln!(report, "a circle:");
            for pair in path.windows(2) {
                let imp = imports
                    .iter()
                    .find(|i| i.from == *files[pair[0]] && i.to == *files[pair[1]]);
                if let Some(imp) = imp {
                    let _ = writeln!(report, "  {}\n      -> {}", krate.cite(imp), imp.to);
                }
            }
        }
        let _ = writeln!(report, "every import inside it:");
        for imp in &imports {
            if members.contains(&index[&imp.from]) && members.contains(&index[&imp.to]) {
                let _ = writeln!(report, "  {}\n      -> {}", krate.cite(imp), imp.to);
            }
        }
        out.push(report);
    }
    out
}

/// Tarjan's strongly connected components (iterative).
fn tarjan(succ: &[BTreeSet<usize>]) -> Vec<Vec<usize>> {
    let n = succ.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut next = 0;
    let mut out = Vec::new();
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        let mut call: Vec<(usize, Vec<usize>)> = vec![(root, succ[root].iter().copied().collect())];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some((v, todo)) = call.last_mut() {
            let v = *v;
            if let Some(w) = todo.pop() {
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    call.push((w, succ[w].iter().copied().collect()));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                call.pop();
                if let Some((u, _)) = call.last() {
                    low[*u] = low[*u].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut scc = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        scc.push(w);
                        if w == v {
                            break;
                        }
                    }
                    out.push(scc);
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------------
// The repository.
// ---------------------------------------------------------------------

fn source_files(dir: &Path, rel: &str, out: &mut BTreeMap<String, String>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry"))
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        let rel = format!("{rel}/{name}");
        if path.is_dir() {
            source_files(&path, &rel, out);
        } else if name.ends_with(".rs") {
            let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {rel}: {e}"));
            out.insert(rel, text);
        }
    }
}

struct Repo {
    krate: Crate,
    layers: Vec<Layer>,
    layer_of: BTreeMap<String, usize>,
    membership_errors: Vec<String>,
}

fn repo() -> Repo {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = BTreeMap::new();
    source_files(&root.join("src"), "src", &mut files);
    let doc = fs::read_to_string(root.join("docs/architecture.md"))
        .expect("reading docs/architecture.md");
    let layers = parse_layers(&doc).unwrap_or_else(|e| panic!("{e}"));
    let names: BTreeSet<String> = files.keys().cloned().collect();
    let (layer_of, membership_errors) = assign_layers(&layers, &names);
    let krate = Crate::build(files, "src/lib.rs");
    Repo {
        krate,
        layers,
        layer_of,
        membership_errors,
    }
}

fn fail(what: &str, errors: &[String]) {
    assert!(
        errors.is_empty(),
        "{what} ({} found; the list is the ```text layers block of docs/architecture.md, \
         see tests/layers.rs for the rules):\n\n{}\n",
        errors.len(),
        errors.join("\n")
    );
}

#[test]
fn every_file_in_exactly_one_layer() {
    let repo = repo();
    let mut errors = repo.membership_errors.clone();
    errors.extend(repo.krate.problems.iter().cloned());
    fail("files and layers do not match", &errors);
}

#[test]
fn no_upward_import() {
    let repo = repo();
    let upward = upward_imports(&repo.krate, &repo.layers, &repo.layer_of);
    let errors: Vec<String> = upward.iter().map(|u| u.1.clone()).collect();
    fail("imports of a higher layer", &errors);
}

#[test]
fn no_import_circle() {
    let repo = repo();
    fail(
        "import circles",
        &circles(&repo.krate, &repo.layers, &repo.layer_of),
    );
}

/// Prints every import, file by file, with its layer: the module graph
/// from the code's own imports.
/// `cargo test --test layers -- --ignored --nocapture print_imports`
#[test]
#[ignore = "prints the import graph; run it by name"]
fn print_imports() {
    let repo = repo();
    let layer = |f: &str| {
        repo.layer_of
            .get(f)
            .map_or("?", |k| repo.layers[*k].name.as_str())
    };
    let mut graph: BTreeMap<&str, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    let imports = repo.krate.imports();
    for imp in &imports {
        let mut at = imp.line.to_string();
        if imp.reexport {
            at.push_str(" (re-export)");
        }
        if let Some(via) = &imp.via {
            at.push_str(&format!(" (through {via})"));
        }
        let lines = graph
            .entry(&imp.from)
            .or_default()
            .entry(imp.to.clone())
            .or_default();
        if !lines.contains(&at) {
            lines.push(at);
        }
    }
    for (from, targets) in graph {
        println!("{from} ({})", layer(from));
        for (to, lines) in targets {
            println!("  -> {to} ({}): line {}", layer(&to), lines.join(", "));
        }
    }
}

// ---------------------------------------------------------------------
// The parser, the resolver and the checks on small inline examples.
// ---------------------------------------------------------------------

mod parser {
    use super::*;

    fn files(list: &[(&str, &str)]) -> BTreeMap<String, String> {
        list.iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect()
    }

    /// The paths of `src` as (segments joined, line, kind).
    fn refs(src: &str) -> Vec<(String, usize, RefKind)> {
        parse(src)
            .refs
            .into_iter()
            .map(|r| (r.segs.join("::"), r.line, r.kind))
            .collect()
    }

    fn use_(name: &str) -> RefKind {
        RefKind::Use {
            name: Some(name.to_string()),
            glob: false,
        }
    }

    #[test]
    fn grouped_nested_multiline_uses() {
        let src = "use crate::{a::{b, c as d}, e};\n\
                   pub(crate) use super::f::{\n    self,\n    g::*,\n};\n\
                   pub use ::std::mem;\n";
        assert_eq!(
            refs(src),
            vec![
                ("crate::a::b".into(), 1, use_("b")),
                ("crate::a::c".into(), 1, use_("d")),
                ("crate::e".into(), 1, use_("e")),
                ("super::f".into(), 3, use_("f")),
                (
                    "super::f::g".into(),
                    4,
                    RefKind::Use {
                        name: None,
                        glob: true
                    }
                ),
                ("std::mem".into(), 6, use_("mem")),
            ]
        );
        assert!(parse(src).refs.last().is_some_and(|r| r.absolute));
    }

    #[test]
    fn uses_inside_functions_and_their_visibility() {
        let f = parse(
            "pub use a::X;\npub(crate) use b::{Y, Z};\nuse c::W;\n\
             fn f() -> Y {\n    use crate::d::e;\n    e()\n}\n",
        );
        let got: Vec<(String, bool, bool)> = f
            .refs
            .iter()
            .filter(|r| r.kind != RefKind::Inline)
            .map(|r| (r.segs.join("::"), r.public, f.is_reexport(r)))
            .collect();
        assert_eq!(
            got,
            vec![
                ("a::X".to_string(), true, true),
                ("b::Y".to_string(), true, false), // `Y` is used by `f`
                ("b::Z".to_string(), true, true),
                ("c::W".to_string(), false, false),
                ("crate::d::e".to_string(), false, false),
            ]
        );
    }

    #[test]
    fn comments_strings_and_attributes_are_not_code() {
        let src = r####"
// use crate::a::b;
/// crate::c::d
//! crate::e
/* crate::f /* nested crate::g */ crate::h */
const S: &str = "crate::i \" crate::j";
const R: &str = r#"crate::k "quoted" crate::l"#;
const C: char = '"';
const Q: char = '\'';
fn f<'a>(x: &'a str) -> &'a str { crate::m::n(x) }
#[doc = "crate::o"]
pub(in crate::p) fn g() {}
const B: &[u8] = b"crate::q";
"####;
        let got: Vec<String> = refs(src).into_iter().map(|r| r.0).collect();
        assert_eq!(got, vec!["crate::m::n".to_string()]);
    }

    #[test]
    fn inline_paths_in_expressions_and_types() {
        let src = "fn f() -> crate::a::B<super::C> {\n    \
                   let x = <T as self::d::Tr>::go();\n    \
                   crate::boundary::call(|| Vec::<u8>::new());\n    \
                   $crate::e::f!();\n    \
                   ::std::mem::drop(x);\n    \
                   self.g(); Self::h();\n}\n";
        let got: Vec<(String, usize)> = refs(src)
            .into_iter()
            .filter(|r| r.2 == RefKind::Inline)
            .map(|r| (r.0, r.1))
            .collect();
        assert_eq!(
            got,
            vec![
                ("crate::a::B".to_string(), 1),
                ("super::C".to_string(), 1),
                ("self::d::Tr".to_string(), 2),
                ("crate::boundary::call".to_string(), 3),
                ("crate::e::f".to_string(), 4),
                ("Self::h".to_string(), 6),
            ]
        );
    }

    #[test]
    fn inline_modules_and_path_attributes() {
        let src = "#[path = \"task/mod.rs\"]\nmod task_impl;\nmod a;\n\
                   pub mod task {\n    pub(crate) mod harness;\n    \
                   pub mod inner { use super::x; }\n    use crate::y;\n}\n\
                   #[cfg(test)]\nmod tests { use super::*; }\n";
        let f = parse(src);
        let mods: Vec<(usize, &str)> = f.mods.iter().map(|m| (m.parent, m.name.as_str())).collect();
        assert_eq!(mods, vec![(0, ""), (0, "task"), (1, "inner"), (0, "tests")]);
        assert_eq!(
            f.mods[0].decls,
            vec![
                ("task_impl".to_string(), Some("task/mod.rs".to_string())),
                ("a".to_string(), None)
            ]
        );
        assert_eq!(f.mods[1].decls, vec![("harness".to_string(), None)]);
        let in_mods: Vec<(usize, String)> = f
            .refs
            .iter()
            .map(|r| (r.module, r.segs.join("::")))
            .collect();
        assert_eq!(
            in_mods,
            vec![
                (2, "super::x".to_string()),
                (1, "crate::y".to_string()),
                (3, "super".to_string())
            ]
        );
    }

    /// The shape lib.rs is moving to: an inline `task` module declaring the
    /// files of src/task/, and inline facades of re-exports.
    #[test]
    fn resolves_inline_modules_of_lib_rs() {
        let krate = Crate::build(
            files(&[
                (
                    "src/lib.rs",
                    "mod executor;\nmod join_set;\n\
                     pub mod task {\n    pub(crate) mod harness;\n    pub(crate) mod raw;\n    \
                     pub use crate::join_set::JoinSet;\n}\n\
                     pub mod remote {\n    pub use crate::executor::remote::{RemoteSpawner, Shared};\n}\n",
                ),
                ("src/join_set.rs", "pub struct JoinSet;"),
                ("src/task/harness.rs", "use super::raw::cell::Cell;\n"),
                ("src/task/raw/mod.rs", "pub(crate) mod cell;\n"),
                ("src/task/raw/cell.rs", "use super::super::harness;\n"),
                ("src/executor/mod.rs", "pub(crate) mod remote;\nuse self::remote::RemoteSpawner;\n"),
                ("src/executor/remote.rs", "use crate::remote::Shared;\nuse crate::task::JoinSet;\n"),
            ]),
            "src/lib.rs",
        );
        assert!(krate.problems.is_empty(), "{:?}", krate.problems);
        let r = |file: &str, path: &str| krate.resolve_from(file, path);
        assert_eq!(
            r("src/executor/mod.rs", "crate::task::harness::poll").as_deref(),
            Some("src/task/harness.rs")
        );
        assert_eq!(
            r("src/executor/mod.rs", "crate::task::raw::cell::Cell").as_deref(),
            Some("src/task/raw/cell.rs")
        );
        assert_eq!(
            r("src/executor/mod.rs", "crate::task::JoinSet").as_deref(),
            Some("src/lib.rs")
        );
        assert_eq!(
            r("src/executor/mod.rs", "crate::remote::RemoteSpawner").as_deref(),
            Some("src/lib.rs")
        );
        assert_eq!(
            r("src/task/raw/cell.rs", "super::super::harness").as_deref(),
            Some("src/task/harness.rs")
        );
        assert_eq!(
            r("src/task/raw/cell.rs", "super::Cell").as_deref(),
            Some("src/task/raw/mod.rs")
        );
        assert_eq!(
            r("src/task/harness.rs", "super::raw").as_deref(),
            Some("src/task/raw/mod.rs")
        );
        // A file declared in the inline `task` module: `super` is `task`
        // (in lib.rs), `super::super` the crate root.
        assert_eq!(
            r("src/task/harness.rs", "super::JoinSet").as_deref(),
            Some("src/lib.rs")
        );
        assert_eq!(
            r("src/task/harness.rs", "super::super::executor").as_deref(),
            Some("src/executor/mod.rs")
        );
        assert_eq!(
            r("src/task/harness.rs", "super::super::join_set").as_deref(),
            Some("src/join_set.rs")
        );
        assert_eq!(r("src/executor/mod.rs", "std::mem").as_deref(), None);

        let imports: Vec<(String, String)> = krate
            .imports()
            .into_iter()
            .map(|i| (i.from, i.to))
            .collect();
        let has = |a: &str, b: &str| imports.contains(&(a.to_string(), b.to_string()));
        assert!(has("src/executor/remote.rs", "src/lib.rs"), "{imports:?}");
        assert!(has("src/executor/mod.rs", "src/executor/remote.rs"));
        assert!(has("src/task/raw/cell.rs", "src/task/harness.rs"));
        assert!(has("src/task/harness.rs", "src/task/raw/cell.rs"));
        // lib.rs's re-exports are imports of lib.rs itself on those files.
        assert!(has("src/lib.rs", "src/join_set.rs"));
        assert!(has("src/lib.rs", "src/executor/remote.rs"));
    }

    /// Today's shape: the task core loaded through `#[path]` and re-exported
    /// by a glob from an inline `task` module.
    #[test]
    fn resolves_path_attribute_and_glob_reexport() {
        let krate = Crate::build(
            files(&[
                (
                    "src/lib.rs",
                    "#[path = \"task/mod.rs\"]\nmod task_impl;\nmod a;\n\
                     pub mod task {\n    pub(crate) use crate::task_impl::*;\n    \
                     pub use crate::task_impl::current::id;\n}\npub use a::Thing;\n",
                ),
                (
                    "src/task/mod.rs",
                    "pub(crate) mod join;\npub(crate) mod current;\npub(crate) mod id;\n",
                ),
                ("src/task/join.rs", ""),
                ("src/task/current.rs", ""),
                ("src/task/id.rs", ""),
                ("src/a.rs", "mod b;\npub struct Thing;\n"),
                (
                    "src/a/b.rs",
                    "use super::Thing;\nfn f() { crate::task::join::x(); }\n",
                ),
            ]),
            "src/lib.rs",
        );
        assert!(krate.problems.is_empty(), "{:?}", krate.problems);
        let r = |file: &str, path: &str| krate.resolve_from(file, path);
        assert_eq!(
            r("src/a/b.rs", "crate::task::join::JoinHandle").as_deref(),
            Some("src/task/join.rs")
        );
        assert_eq!(
            r("src/a/b.rs", "crate::task_impl::current").as_deref(),
            Some("src/task/current.rs")
        );
        assert_eq!(
            r("src/a/b.rs", "crate::task::TaskId").as_deref(),
            Some("src/lib.rs")
        );
        assert_eq!(r("src/a/b.rs", "super::Thing").as_deref(), Some("src/a.rs"));
        assert_eq!(r("src/lib.rs", "a::Thing").as_deref(), Some("src/a.rs"));
        let imports: Vec<(String, String)> = krate
            .imports()
            .into_iter()
            .map(|i| (i.from, i.to))
            .collect();
        assert!(imports.contains(&("src/a/b.rs".to_string(), "src/task/join.rs".to_string())));
        assert!(imports.contains(&("src/a/b.rs".to_string(), "src/a.rs".to_string())));
        assert!(imports.contains(&("src/lib.rs".to_string(), "src/a.rs".to_string())));
    }

    /// A facade (`raw/mod.rs`) re-exports its private modules' items: its
    /// re-exports are not its imports, and an import through one is also an
    /// import of the file the item comes from.
    #[test]
    fn reexports_pass_names_on() {
        let krate = Crate::build(
            files(&[
                ("src/lib.rs", "mod current;\nmod raw;\n"),
                (
                    "src/raw/mod.rs",
                    "mod cell;\nmod header;\npub(crate) use cell::RawTask;\n\
                     pub(crate) use header::Header;\npub(crate) fn f(_: &Header) {}\n",
                ),
                (
                    "src/raw/cell.rs",
                    "use crate::current;\npub struct RawTask;\n",
                ),
                ("src/raw/header.rs", "pub struct Header;\n"),
                ("src/current.rs", "use crate::raw::{Header, RawTask};\n"),
            ]),
            "src/lib.rs",
        );
        let imports: Vec<(String, String, bool, Option<String>)> = krate
            .imports()
            .into_iter()
            .filter(|i| i.from != "src/lib.rs")
            .map(|i| (i.from, i.to, i.reexport, i.via))
            .collect();
        let facade = Some("src/raw/mod.rs".to_string());
        let s = |x: &str| x.to_string();
        assert_eq!(
            imports,
            vec![
                (
                    s("src/current.rs"),
                    s("src/raw/cell.rs"),
                    false,
                    facade.clone()
                ),
                (
                    s("src/current.rs"),
                    s("src/raw/header.rs"),
                    false,
                    facade.clone()
                ),
                (s("src/current.rs"), s("src/raw/mod.rs"), false, None),
                (s("src/current.rs"), s("src/raw/mod.rs"), false, None),
                (s("src/raw/cell.rs"), s("src/current.rs"), false, None),
                (s("src/raw/mod.rs"), s("src/raw/cell.rs"), true, None),
                (s("src/raw/mod.rs"), s("src/raw/header.rs"), false, None),
            ]
        );
        let one = parse_layers("```text layers\nall: src/\n```").expect("a list");
        let names: BTreeSet<String> = krate.files.keys().cloned().collect();
        let (of, _) = assign_layers(&one, &names);
        let c = circles(&krate, &one, &of);
        assert_eq!(c.len(), 1, "{c:?}");
        assert!(
            c[0].starts_with("import circle among 2 files of layer `all`:\n  src/current.rs\n  src/raw/cell.rs\n"),
            "{}",
            c[0]
        );
        assert!(
            c[0].contains(
                "(`crate::raw::RawTask`, re-exported by src/raw/mod.rs)\n      -> src/raw/cell.rs"
            ),
            "{}",
            c[0]
        );
    }

    #[test]
    fn test_modules_count_but_not_their_use_super_star() {
        let krate = Crate::build(
            files(&[
                ("src/lib.rs", "mod a;\nmod b;\n"),
                (
                    "src/a.rs",
                    "#[cfg(test)]\nmod tests {\n    use super::*;\n    use crate::b::helper;\n}\n",
                ),
                ("src/b.rs", "pub fn helper() {}\n"),
            ]),
            "src/lib.rs",
        );
        let imports: Vec<(String, String, usize)> = krate
            .imports()
            .into_iter()
            .map(|i| (i.from, i.to, i.line))
            .collect();
        assert_eq!(
            imports,
            vec![("src/a.rs".to_string(), "src/b.rs".to_string(), 4)]
        );
    }

    #[test]
    fn only_the_list_is_read() {
        let doc = "# A\n\n```text\n lib.rs   the top\n src/x.rs\n```\n\n\
                   prose naming src/y.rs\n\n```text layers\ntop: src/lib.rs\n\
                   bottom: src/a/, src/b.rs\n```\n\n| layer | src/z.rs |\n";
        assert_eq!(
            parse_layers(doc),
            Ok(vec![
                Layer {
                    name: "top".into(),
                    paths: vec!["src/lib.rs".into()]
                },
                Layer {
                    name: "bottom".into(),
                    paths: vec!["src/a/".into(), "src/b.rs".into()]
                },
            ])
        );
        assert!(parse_layers("no list").is_err());
        assert!(parse_layers("```text layers\ntop src/lib.rs\n```\n").is_err());
    }

    #[test]
    fn membership_errors() {
        let layers = parse_layers(
            "```text layers\ntop: src/lib.rs, src/gone.rs\nlow: src/a/, src/a/x.rs\n```\n",
        )
        .expect("a list");
        let files: BTreeSet<String> = ["src/lib.rs", "src/a/x.rs", "src/a/y.rs", "src/stray.rs"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let (of, errors) = assign_layers(&layers, &files);
        assert_eq!(of.get("src/a/y.rs"), Some(&1));
        assert_eq!(errors.len(), 3, "{errors:#?}");
        assert!(errors[0].contains("src/gone.rs"));
        assert!(errors
            .iter()
            .any(|e| e.starts_with("src/a/x.rs is listed 2 times")));
        assert!(errors
            .iter()
            .any(|e| e.starts_with("src/stray.rs is in no layer")));
    }

    #[test]
    fn finds_upward_imports_and_circles() {
        let krate = Crate::build(
            files(&[
                ("src/lib.rs", "mod low;\nmod mid;\nmod top;\n"),
                ("src/top.rs", "use crate::mid::M;\n"),
                ("src/mid.rs", "use crate::low::L;\npub struct M;\n"),
                (
                    "src/low.rs",
                    "pub struct L;\nfn f() {\n    crate::top::go();\n}\n",
                ),
            ]),
            "src/lib.rs",
        );
        let layers = parse_layers(
            "```text layers\ntop: src/lib.rs, src/top.rs\nmid: src/mid.rs\nlow: src/low.rs\n```",
        )
        .expect("a list");
        let files: BTreeSet<String> = krate.files.keys().cloned().collect();
        let (of, errors) = assign_layers(&layers, &files);
        assert!(errors.is_empty(), "{errors:?}");
        let up: Vec<String> = upward_imports(&krate, &layers, &of)
            .into_iter()
            .map(|u| u.1)
            .collect();
        assert_eq!(up.len(), 1, "{up:?}");
        assert!(
            up[0].starts_with("src/low.rs:3: crate::top::go();  (`crate::top::go`)"),
            "{}",
            up[0]
        );
        assert!(up[0].contains("layer `low` imports src/top.rs of the higher layer `top`"));
        // The circle goes through three layers: the upward import is its
        // report.
        assert!(circles(&krate, &layers, &of).is_empty());

        // The same files in one layer: one circle.
        let one = parse_layers("```text layers\nall: src/\n```").expect("a list");
        let (of, errors) = assign_layers(&one, &files);
        assert!(errors.is_empty(), "{errors:?}");
        assert!(upward_imports(&krate, &one, &of).is_empty());
        let c = circles(&krate, &one, &of);
        assert_eq!(c.len(), 1, "{c:?}");
        assert!(
            c[0].starts_with("import circle among 3 files of layer `all`:\n  src/low.rs\n  src/mid.rs\n  src/top.rs\na circle:\n"),
            "{}",
            c[0]
        );
        assert!(
            c[0].contains(
                "  src/low.rs:3: crate::top::go();  (`crate::top::go`)\n      -> src/top.rs\n"
            ),
            "{}",
            c[0]
        );
        assert!(
            c[0].contains(
                "  src/mid.rs:1: use crate::low::L;  (`crate::low::L`)\n      -> src/low.rs\n"
            ),
            "{}",
            c[0]
        );
    }
}
