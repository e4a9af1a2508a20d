//! The rooms of the library and the direction of their imports, checked from the source text
//! against the one description of them: the rooms table of `docs/architecture.md` (each room's
//! floor, what it owns and exactly which rooms it imports) and the floor diagram there.
//!
//! - A room may import only rooms on a lower floor (not its siblings), and its row names
//!   exactly the rooms its code imports; the diagram is the one the table implies.
//! - Inside a room no two files import each other, directly or round a loop. Every path is
//!   followed to the file that defines what it names: through `super::`, `self::`, `crate::`
//!   and a module's own children, and through every re-export on the way, private `use` lines
//!   included. A `mod.rs` is a file like any other: its `use` lines and its bodies import.
//! - Every module's contents list (its `//!` doc) names each of its submodules, so the lists
//!   cannot fall behind the files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One row of the rooms table.
struct Row {
    floor: u32,
    room: String,
    imports: BTreeSet<String>,
}

fn architecture_md() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md")).unwrap()
}

/// The room names in a table cell: each `` `name` ``; `–` is none.
fn names(cell: &str) -> BTreeSet<String> {
    cell.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

/// The rows `| floor | room | owns | imports |` of `docs/architecture.md`.
fn rows() -> Vec<Row> {
    architecture_md()
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let floor = cells.get(1)?.parse().ok()?;
            let room = names(cells.get(2)?).into_iter().next()?;
            Some(Row { floor, room, imports: names(cells.get(4)?) })
        })
        .collect()
}

fn floor(rows: &[Row], room: &str) -> u32 {
    if room == "lib" {
        return u32::MAX;
    }
    rows.iter()
        .find(|r| r.room == room)
        .unwrap_or_else(|| panic!("room `{room}` has no row in docs/architecture.md"))
        .floor
}

/// The diagram the table implies: floors from the top, siblings in braces.
fn diagram(rows: &[Row]) -> String {
    let mut floors: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
    for r in rows {
        floors.entry(r.floor).or_default().push(&r.room);
    }
    floors
        .values()
        .rev()
        .map(|rooms| match rooms.as_slice() {
            [one] => one.to_string(),
            many => format!("{{{}}}", many.join(", ")),
        })
        .collect::<Vec<_>>()
        .join(" → ")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The source without `//` comments (doc comments name rooms above in prose).
fn code(text: &str) -> String {
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

fn ident(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// One source file: its room, its module path inside the room (`data/read/json.rs` is
/// `["read", "json"]`, `data/read/mod.rs` is `["read"]`, `data/mod.rs` and `rng.rs` are `[]`),
/// its text and its code without comments.
struct Source {
    room: String,
    module: Vec<String>,
    text: String,
    code: String,
}

impl Source {
    fn new(rel: &str, text: &str) -> Self {
        let parts: Vec<&str> = rel.trim_end_matches(".rs").split('/').collect();
        let mut module: Vec<String> = parts[1..].iter().map(|s| s.to_string()).collect();
        if module.last().is_some_and(|l| l == "mod") {
            module.pop();
        }
        Source { room: parts[0].to_string(), module, text: text.to_string(), code: code(text) }
    }

    fn name(&self) -> String {
        if self.module.is_empty() { format!("{}/mod", self.room) } else { self.module.join("/") }
    }
}

fn sources() -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files
        .into_iter()
        .filter(|p| p.file_name().unwrap() != "main.rs")
        .map(|p| {
            let rel = p.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
            let rel = if rel == "lib.rs" { "lib/mod.rs".to_string() } else { rel };
            Source::new(&rel, &std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

/// Every path that starts at `start` in `src` (the byte offset just past a path's first
/// `::`), expanded over `{a, b::{c, d}}` groups, each as its segments.
fn paths_at(src: &str, start: usize) -> Vec<Vec<String>> {
    fn tree(s: &str, i: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
        let b = s.as_bytes();
        let skip_ws = |i: &mut usize| {
            while *i < b.len() && (b[*i] as char).is_whitespace() {
                *i += 1;
            }
        };
        let mut path = prefix.to_vec();
        loop {
            skip_ws(i);
            if *i < b.len() && b[*i] == b'{' {
                *i += 1;
                loop {
                    tree(s, i, &path, out);
                    skip_ws(i);
                    match b.get(*i) {
                        Some(b',') => *i += 1,
                        Some(b'}') => {
                            *i += 1;
                            return;
                        }
                        _ => return,
                    }
                    skip_ws(i);
                    if b.get(*i) == Some(&b'}') {
                        *i += 1;
                        return;
                    }
                }
            }
            let id = ident(&s[*i..]);
            if id.is_empty() {
                break;
            }
            *i += id.len();
            path.push(id.to_string());
            if s[*i..].starts_with("::") && !s[*i + 2..].starts_with('<') {
                *i += 2;
            } else {
                break;
            }
        }
        if path.len() > prefix.len() {
            out.push(path);
        }
    }
    let mut out = Vec::new();
    let mut i = start;
    tree(src, &mut i, &[], &mut out);
    out
}

/// Every path in `code` that begins with an identifier the caller accepts (`crate`, `super`,
/// `self` or a child module's name), not preceded by `::` or an identifier character; each
/// path begins with that identifier.
fn paths(code: &str, first: impl Fn(&str) -> bool) -> Vec<Vec<String>> {
    located_paths(code, first).into_iter().map(|(_, p)| p).collect()
}

/// [`paths`], each with the byte offset where it starts.
fn located_paths(code: &str, first: impl Fn(&str) -> bool) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices("::") {
        let before = &code[..i];
        let id_start = before.rfind(|c: char| !(c.is_alphanumeric() || c == '_')).map_or(0, |p| p + 1);
        let id = &before[id_start..];
        let prev = before[..id_start].chars().next_back();
        if id.is_empty() || !first(id) || prev == Some(':') || prev == Some('$') {
            continue;
        }
        for mut p in paths_at(code, i + 2) {
            p.insert(0, id.to_string());
            out.push((id_start, p));
        }
    }
    out
}

/// The inline modules of `code` (`mod tests { … }`): each name with the byte span of its body.
fn inline_modules(code: &str) -> Vec<(String, std::ops::Range<usize>)> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices("mod ") {
        if code[..i].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let name = ident(&code[i + 4..]);
        let after = code[i + 4 + name.len()..].trim_start();
        if name.is_empty() || !after.starts_with('{') {
            continue;
        }
        let open = code.len() - after.len();
        let mut depth = 0usize;
        for (j, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        out.push((name.to_string(), open..open + j));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// The files of one room and how paths inside it resolve.
struct Room<'a> {
    files: BTreeMap<Vec<String>, &'a Source>,
}

impl<'a> Room<'a> {
    fn children(&self, m: &[String]) -> BTreeSet<String> {
        self.files
            .keys()
            .filter(|k| k.len() == m.len() + 1 && k.starts_with(m))
            .map(|k| k.last().unwrap().clone())
            .collect()
    }

    /// The module of the file that holds module `m` (an inline module is in its parent's file).
    fn file_of(&self, mut m: Vec<String>) -> Vec<String> {
        while !self.files.contains_key(&m) && m.pop().is_some() {}
        m
    }

    /// The `use` paths of module `m`'s file whose last segment (or alias) is `item`.
    fn reexport(&self, m: &[String], item: &str) -> Option<Vec<String>> {
        let src = self.files.get(m)?;
        let inline = inline_modules(&src.code);
        for (i, _) in src.code.match_indices("use ") {
            let prev = src.code[..i].chars().next_back();
            if prev.is_some_and(|c| c.is_alphanumeric() || c == '_') || inline.iter().any(|(_, s)| s.contains(&i)) {
                continue;
            }
            let end = src.code[i..].find(';').map_or(src.code.len(), |e| i + e);
            let stmt = &src.code[i + 4..end];
            let alias = stmt.rsplit_once(" as ").map(|(_, a)| ident(a.trim()).to_string());
            for p in paths_at(stmt, 0) {
                let last = p.last().cloned().unwrap_or_default();
                if last == item || (alias.as_deref() == Some(item) && !stmt.contains('{')) {
                    return Some(p);
                }
            }
        }
        None
    }

    /// The file that defines what `path` names, read from module `from` of room `room`; `None`
    /// when it lies outside the room (another room, the standard library, a crate).
    fn resolve(&self, room: &str, from: &[String], path: &[String], depth: usize) -> Option<Vec<String>> {
        let (mut m, rest): (Vec<String>, &[String]) = match path.first().map(String::as_str) {
            Some("crate") if path.get(1).is_some_and(|r| r == room) => (Vec::new(), &path[2..]),
            Some("crate") => return None,
            Some("super" | "self") => (from.to_vec(), path),
            Some(first) if self.children(from).contains(first) => (from.to_vec(), path),
            _ => return None,
        };
        for s in rest {
            match s.as_str() {
                "super" => {
                    m.pop()?;
                }
                "self" => {}
                s if self.children(&m).contains(s) => m.push(s.to_string()),
                s => {
                    return match self.reexport(&m, s).filter(|_| depth < 8) {
                        Some(p) => self.resolve(room, &m, &p, depth + 1),
                        None => Some(m),
                    };
                }
            }
        }
        Some(m)
    }

    /// The in-room imports of each file: the files its paths name.
    fn edges(&self, room: &str) -> BTreeMap<String, BTreeSet<String>> {
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (module, src) in &self.files {
            let children = self.children(module);
            let inline = inline_modules(&src.code);
            let starts = |id: &str| id == "crate" || id == "super" || id == "self" || children.contains(id);
            for (at, p) in located_paths(&src.code, starts) {
                // A path inside `mod tests { … }` is read from that inline module.
                let mut from = module.clone();
                from.extend(inline.iter().filter(|(_, span)| span.contains(&at)).map(|(n, _)| n.clone()));
                let target = self.resolve(room, &from, &p, 0).map(|t| self.file_of(t));
                if let Some(t) = target.filter(|t| t != module).and_then(|t| self.files.get(&t)) {
                    edges.entry(src.name()).or_default().insert(t.name());
                }
            }
        }
        edges
    }
}

fn rooms(all: &[Source]) -> BTreeMap<&str, Room<'_>> {
    let mut rooms: BTreeMap<&str, Room> = BTreeMap::new();
    for s in all {
        rooms
            .entry(s.room.as_str())
            .or_insert_with(|| Room { files: BTreeMap::new() })
            .files
            .insert(s.module.clone(), s);
    }
    rooms
}

/// Every room's imports: the rooms its files name after `crate::`.
fn imports(all: &[Source]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in all {
        let entry = out.entry(s.room.clone()).or_default();
        for p in paths(&s.code, |id| id == "crate") {
            if let Some(room) = p.get(1).filter(|r| **r != s.room) {
                entry.insert(room.clone());
            }
        }
    }
    out
}

#[test]
fn no_room_imports_a_room_above_it_or_beside_it() {
    let rows = rows();
    let wrong: Vec<String> = imports(&sources())
        .iter()
        .flat_map(|(from, to)| to.iter().map(move |t| (from, t)))
        .filter(|(from, to)| *from != "lib" && floor(&rows, to) >= floor(&rows, from))
        .map(|(from, to)| format!("{from} → {to}"))
        .collect();
    assert!(wrong.is_empty(), "imports that go up or sideways: {}", wrong.join(", "));
}

/// The table names every room there is, and each room's row names exactly what it imports.
#[test]
fn the_rooms_table_says_what_each_room_imports() {
    let (rows, actual) = (rows(), imports(&sources()));
    let documented: BTreeSet<&str> = rows.iter().map(|r| r.room.as_str()).collect();
    let real: BTreeSet<&str> = actual.keys().map(String::as_str).filter(|r| *r != "lib").collect();
    assert_eq!(documented, real, "docs/architecture.md's rooms (left) and the rooms in src/ (right) differ");
    let wrong: Vec<String> = rows
        .iter()
        .filter(|r| actual.get(&r.room).is_some_and(|a| *a != r.imports))
        .map(|r| {
            let a = &actual[&r.room];
            let cell = if a.is_empty() {
                "–".into()
            } else {
                a.iter().map(|x| format!("`{x}`")).collect::<Vec<_>>().join(", ")
            };
            format!("`{}` imports {cell}", r.room)
        })
        .collect();
    assert!(wrong.is_empty(), "docs/architecture.md's imports column is wrong; the code says:\n{}", wrong.join("\n"));
}

/// The floor diagram in `docs/architecture.md` is the one the table implies (and `lib.rs` points
/// there instead of drawing its own).
#[test]
fn the_floor_diagram_is_the_tables() {
    let want = diagram(&rows());
    let md = architecture_md();
    assert!(md.contains(&format!("```text\n{want}\n```")), "docs/architecture.md's diagram should read:\n{want}");
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    assert!(!lib.contains(" → "), "src/lib.rs draws the floors; point to docs/architecture.md instead");
}

/// The first loop among the files of each room, if any.
fn loops(all: &[Source]) -> Vec<String> {
    rooms(all)
        .iter()
        .filter_map(|(room, r)| find_cycle(&r.edges(room)).map(|c| format!("`{room}`: {}", c.join(" → "))))
        .collect()
}

#[test]
fn no_two_files_of_a_room_import_each_other() {
    let found = loops(&sources());
    assert!(found.is_empty(), "files import each other in a loop:\n{}", found.join("\n"));
}

/// A cycle in a directed graph, if there is one (depth-first search with colours).
fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let start = stack.iter().position(|x| x == m).unwrap();
                    let mut c = stack[start..].to_vec();
                    c.push(m.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(m, edges, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in edges.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0
            && let Some(c) = visit(n, edges, &mut state, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

/// The submodules a module's file declares, those under `#[cfg(test)]` left out.
fn declared_modules(src: &Source) -> Vec<String> {
    let mut out = Vec::new();
    let mut test_only = false;
    for line in src.code.lines().map(str::trim) {
        if line.starts_with("#[cfg(test)]") {
            test_only = true;
            continue;
        }
        let decl = line
            .strip_prefix("pub mod ")
            .or_else(|| line.strip_prefix("mod "))
            .or_else(|| line.strip_prefix("pub(crate) mod ").or_else(|| line.strip_prefix("pub(super) mod ")));
        if let Some(name) = decl.filter(|d| d.ends_with(';') && !test_only) {
            out.push(ident(name).to_string());
        }
        if !line.starts_with('#') {
            test_only = false;
        }
    }
    out
}

/// The submodules of `src` that its `//!` doc does not name (as `` `name` `` or
/// ``[`name`]``).
fn unlisted(src: &Source) -> Vec<String> {
    let doc: String = src.text.lines().filter_map(|l| l.trim().strip_prefix("//!")).collect::<Vec<_>>().join("\n");
    declared_modules(src).into_iter().filter(|m| !doc.contains(&format!("`{m}`"))).collect()
}

#[test]
fn every_module_lists_its_submodules() {
    let all = sources();
    let missing: Vec<String> = all
        .iter()
        .map(|s| (s, unlisted(s)))
        .filter(|(_, m)| !m.is_empty())
        .map(|(s, m)| format!("{}: {}", s.name(), m.join(", ")))
        .collect();
    assert!(missing.is_empty(), "these modules' contents lists (their //! docs) do not name:\n{}", missing.join("\n"));
}

#[test]
fn the_checker_sees_loops_and_upward_imports() {
    let p = paths("use crate::{model::Transformer, io};", |id| id == "crate");
    assert_eq!(p, [vec!["crate", "model", "Transformer"], vec!["crate", "io"]]);
    let nested = paths("use super::{a::{X, y::Z}, b};", |id| id == "super");
    assert_eq!(nested, [vec!["super", "a", "X"], vec!["super", "a", "y", "Z"], vec!["super", "b"]]);
    let edges: BTreeMap<String, BTreeSet<String>> = [("a", "b"), ("b", "c"), ("c", "a")]
        .iter()
        .map(|(x, y)| (x.to_string(), BTreeSet::from([y.to_string()])))
        .collect();
    assert_eq!(find_cycle(&edges).unwrap(), ["a", "b", "c", "a"]);
    let row = |floor, room: &str| Row { floor, room: room.into(), imports: BTreeSet::new() };
    let rows = [row(0, "io"), row(0, "rng"), row(1, "model"), row(2, "train")];
    assert_eq!(diagram(&rows), "train → model → {io, rng}");
    assert!(floor(&rows, "train") > floor(&rows, "model"));
    assert_eq!(names("`io`, `rng`"), BTreeSet::from(["io".to_string(), "rng".to_string()]));
    assert!(names("–").is_empty());
}

/// A loop through a private `use` in `mod.rs`: `a` uses `super::helper`, which `mod.rs`
/// brings in privately from `b`, and `b` uses `a`.
#[test]
fn the_checker_sees_a_loop_through_a_private_use() {
    let room = [
        Source::new("room/mod.rs", "//! [`a`], [`b`]\nmod a;\nmod b;\nuse b::helper;\npub use a::A;\n"),
        Source::new("room/a.rs", "pub struct A;\nfn f() { super::helper(); }\n"),
        Source::new("room/b.rs", "pub fn helper() {}\nfn g(_: super::A) {}\n"),
    ];
    let found = loops(&room);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("a → b → a") || found[0].contains("b → a → b"), "{found:?}");
}

/// A loop through a `mod.rs`: its body calls a child, and the child calls a function defined
/// in that body.
#[test]
fn the_checker_sees_a_loop_through_a_mod_rs() {
    let room = [
        Source::new("room/mod.rs", "//! [`child`]\nmod child;\npub fn run() { child::work(); }\nfn shared() {}\n"),
        Source::new("room/child.rs", "pub fn work() { super::shared(); }\n"),
    ];
    let found = loops(&room);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("room/mod") && found[0].contains("child"), "{found:?}");
    // The same room with the shared function in a file of its own has no loop.
    let fixed = [
        Source::new("room/mod.rs", "//! [`child`], [`shared`]\nmod child;\nmod shared;\npub use child::work;\n"),
        Source::new("room/child.rs", "pub fn work() { super::shared::shared(); }\n"),
        Source::new("room/shared.rs", "pub fn shared() {}\n"),
    ];
    assert!(loops(&fixed).is_empty());
}

#[test]
fn the_checker_sees_a_contents_list_that_falls_behind() {
    let src = Source::new("room/mod.rs", "//! - [`a`]: the first\nmod a;\nmod b;\n#[cfg(test)]\nmod tests;\n");
    assert_eq!(unlisted(&src), ["b"]);
}

/// The rows `| 5.k | `model::x` | owns | imports |` of the model's rooms table: floor `k` inside
/// the room `model` (whose floor in the rooms table is 5).
fn model_rows() -> Vec<Row> {
    architecture_md()
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let floor = cells.get(1)?.strip_prefix("5.")?.parse().ok()?;
            let room = names(cells.get(2)?).into_iter().next()?;
            Some(Row { floor, room, imports: names(cells.get(4)?) })
        })
        .collect()
}

/// The model room a file of `model` is in (its name as [`Source::name`] gives it): the longest
/// of its module's prefixes the table names, or `model` (the top) when none is.
fn model_room(file: &str, rows: &[Row]) -> String {
    let module: Vec<&str> = if file == "model/mod" { Vec::new() } else { file.split('/').collect() };
    (1..=module.len())
        .rev()
        .map(|n| format!("model::{}", module[..n].join("::")))
        .find(|room| rows.iter().any(|r| r.room == *room))
        .unwrap_or_else(|| "model".into())
}

/// Every model room's imports of the other model rooms.
fn model_imports(rows: &[Row]) -> BTreeMap<String, BTreeSet<String>> {
    let all = sources();
    let rooms = rooms(&all);
    let mut out: BTreeMap<String, BTreeSet<String>> = rows.iter().map(|r| (r.room.clone(), BTreeSet::new())).collect();
    for (from, to) in rooms["model"].edges("model") {
        let from = model_room(&from, rows);
        let to: BTreeSet<String> = to.iter().map(|t| model_room(t, rows)).filter(|t| *t != from).collect();
        out.entry(from).or_default().extend(to);
    }
    out
}

/// Inside `model`, each room (attention, the feed-forward and its experts, the residual schemes,
/// the shared base, the top that puts them together) imports only rooms below it, and its row
/// of the model's rooms table names exactly those.
#[test]
fn the_model_rooms_import_only_rooms_below_them_as_their_table_says() {
    let rows = model_rows();
    let floor_of = |room: &str| rows.iter().find(|r| r.room == room).map(|r| r.floor);
    let actual = model_imports(&rows);
    let mut wrong = Vec::new();
    for (from, to) in &actual {
        let Some(row) = rows.iter().find(|r| r.room == *from) else {
            wrong.push(format!("`{from}` has no row in the model's rooms table"));
            continue;
        };
        for t in to.iter().filter(|t| floor_of(t) >= Some(row.floor)) {
            wrong.push(format!("`{from}` imports `{t}`, which is not below it"));
        }
        if *to != row.imports {
            let cell = to.iter().map(|x| format!("`{x}`")).collect::<Vec<_>>().join(", ");
            wrong.push(format!("`{from}`'s imports are {}", if cell.is_empty() { "–".into() } else { cell }));
        }
    }
    assert!(!rows.is_empty() && wrong.is_empty(), "docs/architecture.md's model rooms:\n{}", wrong.join("\n"));
}

/// The generic places know no scheme by name: attention and the residual schemes carry nothing
/// of the mixture of experts, and the training step knows loss terms and readings only by name.
#[test]
fn no_moe_name_in_attention_residual_or_the_step() {
    let generic = |s: &&Source| {
        let file = s.module.join("/");
        (s.room == "model" && (file.starts_with("attention") || file.starts_with("residual")))
            || (s.room == "train" && file == "step")
    };
    let all = sources();
    let found: Vec<String> = all
        .iter()
        .filter(generic)
        .filter(|s| ["moe", "expert", "router", "routing"].iter().any(|w| s.code.to_lowercase().contains(w)))
        .map(Source::name)
        .collect();
    assert!(found.is_empty(), "files that name the mixture of experts: {}", found.join(", "));
}
