//! Former names: studies, configs and published tables were once named after the files the
//! papers came in. `docs/references.md`'s "Former names" table maps each to its name now, and
//! is read from here, so that the old names keep working and live in that one table.

/// `docs/references.md`.
const REFERENCES: &str = include_str!("../../docs/references.md");

/// The current name of a study or published table given by its former name.
pub fn renamed(name: &str) -> Option<&'static str> {
    let table = &REFERENCES[REFERENCES.find("## Former names")?..];
    table.lines().find_map(|l| {
        let cells: Vec<&str> = l.split('|').map(|c| c.trim().trim_matches('`')).collect();
        if cells.len() == 4 && cells[1] == name { Some(cells[2]) } else { None }
    })
}
