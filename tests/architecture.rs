//! The rooms of the library and the direction of their imports, checked from the source text
//! against the one description of them: the rooms table of `docs/architecture.md` (each room's
//! floor, what it owns and exactly which rooms it imports) and the floor diagram there.
//!
//! A room may import only rooms on a lower floor (not its siblings), its row must name exactly
//! the rooms its code imports, the diagram must be the one the table implies, and inside a room
//! no two files import each other, directly or round a loop.

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
fn code(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// Every path that follows `prefix` (`crate::` or `super::`), as its first two segments; a
/// `{a, b::c}` group gives one path per member.
fn paths(src: &str, prefix: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for (i, _) in src.match_indices(prefix) {
        let rest = &src[i + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let body = &group[..group.find('}').unwrap_or(group.len())];
            for member in body.split(',') {
                let mut seg = member.trim().split("::");
                let first = ident(seg.next().unwrap_or("")).to_string();
                out.push((first, seg.next().map(|s| ident(s.trim()).to_string())));
            }
        } else {
            let first = ident(rest).to_string();
            let second = rest[first.len()..].strip_prefix("::").map(|s| ident(s).to_string());
            out.push((first, second));
        }
    }
    out.retain(|(f, _)| !f.is_empty() && f != "self");
    out
}

struct Source {
    room: String,
    /// File stem inside its room (`mod` for `mod.rs`, the room itself for a one-file room).
    file: String,
    code: String,
}

fn sources() -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files
        .into_iter()
        .filter(|p| p.file_name().unwrap() != "main.rs")
        .map(|p| {
            let rel = p.strip_prefix(&root).unwrap();
            let parts: Vec<String> =
                rel.iter().map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string()).collect();
            let file = parts.last().unwrap().clone();
            Source { room: parts[0].clone(), file, code: code(&p) }
        })
        .collect()
}

/// Every room's imports: the rooms its files name after `crate::`.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in sources() {
        let entry = out.entry(s.room.clone()).or_default();
        for (room, _) in paths(&s.code, "crate::") {
            if room != s.room {
                entry.insert(room);
            }
        }
    }
    out
}

#[test]
fn no_room_imports_a_room_above_it_or_beside_it() {
    let rows = rows();
    let wrong: Vec<String> = imports()
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
    let (rows, actual) = (rows(), imports());
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

/// Items a room's `mod.rs` re-exports, to the file that defines them.
fn reexports(mod_rs: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for line in mod_rs.lines().filter_map(|l| l.trim().strip_prefix("pub use ")) {
        let Some((file, items)) = line.split_once("::") else { continue };
        let items = items.trim_end_matches(';').trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            map.insert(ident(item.trim()).to_string(), file.to_string());
        }
    }
    map
}

#[test]
fn no_two_files_of_a_room_import_each_other() {
    let all = sources();
    let rooms: BTreeSet<&str> = all.iter().map(|s| s.room.as_str()).collect();
    for room in rooms {
        let files: Vec<&Source> = all.iter().filter(|s| s.room == room).collect();
        let names: BTreeSet<&str> = files.iter().map(|s| s.file.as_str()).collect();
        let exported = files.iter().find(|s| s.file == "mod").map(|s| reexports(&s.code)).unwrap_or_default();
        let target = |seg: &str| -> Option<String> {
            if names.contains(seg) { Some(seg.to_string()) } else { exported.get(seg).cloned() }
        };
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for s in files.iter().filter(|s| s.file != "mod") {
            let via_super = paths(&s.code, "super::").into_iter().map(|(a, _)| a);
            let via_crate = paths(&s.code, "crate::").into_iter().filter(|(r, _)| r == room).filter_map(|(_, b)| b);
            for seg in via_super.chain(via_crate) {
                if let Some(t) = target(&seg).filter(|t| *t != s.file && t != "mod") {
                    edges.entry(s.file.clone()).or_default().insert(t);
                }
            }
        }
        if let Some(cycle) = find_cycle(&edges) {
            panic!("files of `{room}` import each other in a loop: {}", cycle.join(" → "));
        }
    }
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

#[test]
fn the_checker_sees_loops_and_upward_imports() {
    // The checker itself, on text it must flag.
    assert_eq!(
        paths("use crate::{model::Transformer, io};", "crate::"),
        [("model".to_string(), Some("Transformer".to_string())), ("io".to_string(), None)]
    );
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
