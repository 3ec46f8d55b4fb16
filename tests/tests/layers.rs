//! The import graph of jobq's crates, module by module: which modules
//! import each other in a loop. A module is a file; `A -> B` when A names
//! an item of B (`use crate::b::…`, `super::…`, `self::…`, a path in an
//! expression, or an item lib.rs re-exports from B; a `mod` declaration is
//! not one). Neither jobq-runtime nor jobq-web has a loop: each module
//! stands above everything it imports.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Every `.rs` file under `dir`, with its module path (`store/mysql/mod.rs`
/// → `store::mysql`; lib.rs is the root, `[]`).
fn modules(dir: &Path) -> BTreeMap<Module, String> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<Module, String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(root).unwrap().with_extension("");
                let mut parts: Module = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                if matches!(
                    parts.last().map(String::as_str),
                    Some("mod" | "lib" | "main")
                ) {
                    parts.pop();
                }
                out.insert(parts, std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// The code of a file without comments, string and char literals and its
/// unit-test module (`#[cfg(test)] mod tests { … }`, by convention at the
/// end): what is left names items only where the code does.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests {") {
        Some(at) => &text[..at],
        None => text,
    };
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && next == Some('*') {
            i += 2;
            while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                i += 1;
            }
            i += 2;
            continue;
        }
        // A raw string: r"…", r#"…"#.
        let ident_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if c == 'r' && !ident_before && matches!(next, Some('"' | '#')) {
            let mut hashes = 0;
            let mut j = i + 1;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) == Some(&'"') {
                j += 1;
                'raw: while j < chars.len() {
                    if chars[j] == '"' && (1..=hashes).all(|k| chars.get(j + k) == Some(&'#')) {
                        j += 1 + hashes;
                        break 'raw;
                    }
                    j += 1;
                }
                out.push_str("\"\"");
                i = j;
                continue;
            }
        }
        if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
            continue;
        }
        // A char literal ('x', '\n', '\''), not a lifetime ('a).
        if c == '\'' {
            if next == Some('\\') {
                let mut j = i + 2;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                continue;
            }
            if chars.get(i + 2) == Some(&'\'') {
                i += 3;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

/// The paths a use tree names: `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`.
fn use_paths(tree: &str) -> Vec<Vec<String>> {
    // `X as Y` names X; whitespace means nothing else in a use tree.
    let tree = tree.replace(" as ", "@");
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    fn expand(tree: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
        // Split at top-level commas.
        let mut depth = 0;
        let mut start = 0;
        let mut parts = Vec::new();
        for (i, c) in tree.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&tree[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&tree[start..]);
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            match part.find('{') {
                Some(open) => {
                    let head = part[..open].trim_end_matches("::");
                    let mut path = prefix.to_vec();
                    path.extend(head.split("::").filter(|s| !s.is_empty()).map(String::from));
                    expand(&part[open + 1..part.len() - 1], &path, out);
                }
                None => {
                    let name = part.split('@').next().unwrap_or(part);
                    let mut path = prefix.to_vec();
                    path.extend(name.split("::").map(String::from));
                    out.push(path);
                }
            }
        }
    }
    let mut out = Vec::new();
    expand(&tree, &[], &mut out);
    out
}

/// Every path a file names that starts at `crate`, `super` or `self`, or
/// (in a `use`) at a module of the crate; as written.
fn named_paths(code: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    // Use declarations, whole trees.
    let mut rest = code;
    while let Some(at) = find_word(rest, "use") {
        let after = &rest[at + 3..];
        let Some(end) = after.find(';') else { break };
        paths.extend(use_paths(&after[..end]));
        rest = &after[end..];
    }
    // Paths in expressions and types: `crate::a::b`, `super::x`.
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(start) {
            let at = from + at;
            from = at + start.len();
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            // A visibility, `pub(in crate::worker)`, names where an item
            // is seen, not an item it uses.
            if code[..at].trim_end().ends_with("(in") {
                continue;
            }
            let path: String = code[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            if path.ends_with("::") {
                // `super::{a, b}`: a use tree, read above.
                continue;
            }
            paths.push(
                path.split("::")
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect(),
            );
        }
    }
    paths
}

/// Where `word` stands as a word (not inside an identifier) in `text`.
fn find_word(text: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = text[from..].find(word) {
        let at = from + at;
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        if !ident(before) && !ident(after) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// The module graph of the crate in `src`: module → the modules it names.
fn graph(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let mods = modules(src);
    // What lib.rs re-exports: name → the module it comes from.
    let mut exported: BTreeMap<String, Module> = BTreeMap::new();
    let lib = code(&mods[&Vec::new()]);
    for path in named_paths(&lib) {
        if let Some((name, module)) = path.split_last() {
            if mods.contains_key(module) && !module.is_empty() {
                exported.insert(name.clone(), module.to_vec());
            }
        }
    }
    let resolve = |path: &[String]| -> Option<Module> {
        let module = (0..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|m| mods.contains_key(m))?;
        if module.is_empty() {
            return path.first().and_then(|name| exported.get(name).cloned());
        }
        Some(module)
    };
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, text) in &mods {
        let is_dir = mods
            .keys()
            .any(|m| m.len() > module.len() && m.starts_with(module));
        // `self` of a file is its module; `super` its parent (of a
        // `mod.rs`, the folder's parent).
        let targets = edges.entry(module.clone()).or_default();
        for path in named_paths(&code(text)) {
            let absolute: Vec<String> = match path.first().map(String::as_str) {
                Some("crate") => path[1..].to_vec(),
                Some("super") => {
                    let ups = path.iter().take_while(|s| *s == "super").count();
                    let base = &module[..module.len().saturating_sub(ups)];
                    base.iter().chain(&path[ups..]).cloned().collect()
                }
                Some("self") => module.iter().chain(&path[1..]).cloned().collect(),
                // A child module named directly (`use filter::X` in a mod.rs).
                Some(first)
                    if is_dir
                        && mods
                            .contains_key(&[module.as_slice(), &[first.to_owned()]].concat()) =>
                {
                    module.iter().chain(&path).cloned().collect()
                }
                _ => continue,
            };
            if let Some(target) = resolve(&absolute) {
                if &target != module && !target.is_empty() {
                    targets.insert(target);
                }
            }
        }
    }
    edges
}

/// The loops of `edges`: strongly connected components of two or more
/// modules, each sorted, with the edges inside it.
fn loops(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<(Vec<String>, Vec<String>)> {
    // Tarjan's algorithm, iterative enough for a few hundred modules.
    struct State<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        on_stack: BTreeSet<Module>,
        found: Vec<Vec<Module>>,
    }
    fn strong(s: &mut State<'_>, v: &Module) {
        let n = s.index.len();
        s.index.insert(v.clone(), n);
        s.low.insert(v.clone(), n);
        s.stack.push(v.clone());
        s.on_stack.insert(v.clone());
        for w in s.edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                strong(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v.clone(), low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v.clone(), low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(&w);
                let last = &w == v;
                component.push(w);
                if last {
                    break;
                }
            }
            s.found.push(component);
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !state.index.contains_key(v) {
            strong(&mut state, v);
        }
    }
    let name = |m: &Module| {
        if m.is_empty() {
            "lib".to_owned()
        } else {
            m.join("::")
        }
    };
    let mut out: Vec<_> = state
        .found
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| {
            let members: BTreeSet<&Module> = c.iter().collect();
            let mut arrows = Vec::new();
            for a in &members {
                for b in &edges[*a] {
                    if members.contains(b) {
                        arrows.push(format!("{} -> {}", name(a), name(b)));
                    }
                }
            }
            let mut names: Vec<String> = c.iter().map(name).collect();
            names.sort();
            (names, arrows)
        })
        .collect();
    out.sort();
    out
}

fn describe(found: &[(Vec<String>, Vec<String>)]) -> String {
    found
        .iter()
        .map(|(members, arrows)| {
            format!(
                "a loop of {}: {}\n  {}",
                members.len(),
                members.join(", "),
                arrows.join("\n  ")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn jobq_runtime_modules_import_in_one_direction() {
    let found = loops(&graph(&workspace().join("jobq-runtime/src")));
    assert!(found.is_empty(), "{}", describe(&found));
}

#[test]
fn jobq_web_modules_import_in_one_direction() {
    let found = loops(&graph(&workspace().join("jobq-web/src")));
    assert!(found.is_empty(), "{}", describe(&found));
}

#[test]
fn the_check_finds_a_loop_and_follows_re_exports() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir(src.join("store")).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        "mod handle;\nmod store;\npub use handle::Jobq;\n",
    )
    .unwrap();
    std::fs::write(
        src.join("handle.rs"),
        "use crate::store::Store;\npub struct Jobq;\n",
    )
    .unwrap();
    // A char literal holding a quote, a raw string and a test module
    // declared (not inline) hide nothing that follows them.
    std::fs::write(
        src.join("store/mod.rs"),
        "mod sql;\n#[cfg(test)]\nmod tests;\nconst Q: char = '\"';\nconst R: &str = r#\"a\"b\"#;\nuse sql::X;\npub struct Store;\n",
    )
    .unwrap();
    // Through lib.rs's re-export, in an expression: store::sql -> handle.
    std::fs::write(
        src.join("store/sql.rs"),
        "pub struct X;\nfn f() { let _ = crate::Jobq; }\n",
    )
    .unwrap();
    let found = loops(&graph(src));
    assert_eq!(
        found.iter().map(|(m, _)| m.clone()).collect::<Vec<_>>(),
        [vec![
            "handle".to_owned(),
            "store".into(),
            "store::sql".into()
        ]],
        "{}",
        describe(&found)
    );
}

#[test]
fn a_visibility_restricted_to_a_module_is_not_an_import_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir(src.join("worker")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod worker;\n").unwrap();
    std::fs::write(
        src.join("worker/mod.rs"),
        "mod task;\npub use task::Task;\n",
    )
    .unwrap();
    std::fs::write(
        src.join("worker/task.rs"),
        "pub struct Task;\npub(in crate::worker) fn run() {}\n",
    )
    .unwrap();
    let found = loops(&graph(src));
    assert!(found.is_empty(), "{}", describe(&found));
    // The same file naming its parent's item is one.
    std::fs::write(
        src.join("worker/task.rs"),
        "pub struct Task;\npub(in crate::worker) fn run() { let _ = crate::worker::Task; }\n",
    )
    .unwrap();
    assert_eq!(loops(&graph(src)).len(), 1);
}
