//! The catalogue against the reference's table "agentd's own tools", kept verbatim in
//! `tests/data/own-tools.tsv`: every tool, in the table's order, with its default grants and
//! what it does.

use agentd_tools::{Grant, catalogue};

/// One expanded row: a tool's name, default grants and what it does.
#[derive(Debug, PartialEq)]
struct Row {
    name: String,
    grants: Vec<Grant>,
    does: String,
}

/// `memory.get, .set` as `memory.get`, `memory.set`; `sleep, await` as `sleep`, `await`.
fn names(family: &str) -> Vec<String> {
    let mut prefix = "";
    family
        .split(", ")
        .map(|name| match name.strip_prefix('.') {
            Some(verb) => format!("{prefix}.{verb}"),
            None => {
                prefix = name.rsplit_once('.').map_or(name, |(p, _)| p);
                name.to_owned()
            }
        })
        .collect()
}

/// `root, workflow` as its grants; `everyone, A2A callers included` as everyone.
fn grants(cell: &str) -> Vec<Grant> {
    if cell.starts_with("everyone") {
        return vec![Grant::Everyone];
    }
    cell.split(", ")
        .map(|g| Grant::parse(g).unwrap_or_else(|| panic!("a grant: {g:?}")))
        .collect()
}

/// The table's rows, each family expanded.
fn table() -> Vec<Row> {
    let text = include_str!("data/own-tools.tsv");
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    assert_eq!(lines.next(), Some("Tool\tDefault grant\tDoes"));
    lines
        .flat_map(|line| {
            let cells: Vec<&str> = line.split('\t').collect();
            let [family, grant, does] = cells[..] else {
                panic!("three cells: {line:?}")
            };
            names(family).into_iter().map(move |name| Row {
                name,
                grants: grants(grant),
                does: does.to_owned(),
            })
        })
        .collect()
}

#[test]
fn families_expand_to_their_tools() {
    assert_eq!(names("memory.get, .set"), ["memory.get", "memory.set"]);
    assert_eq!(names("sleep, await"), ["sleep", "await"]);
    assert_eq!(names("ask_human"), ["ask_human"]);
    assert_eq!(grants("root, subagent"), [Grant::Root, Grant::Subagent]);
}

#[test]
fn every_tool_has_the_reference_grants_and_description() {
    let table = table();
    let catalogue: Vec<Row> = catalogue()
        .iter()
        .map(|t| Row {
            name: t.name.to_owned(),
            grants: t.grants.to_vec(),
            does: t.does.to_owned(),
        })
        .collect();
    for (want, got) in table.iter().zip(&catalogue) {
        assert_eq!(got, want);
    }
    let names = |rows: &[Row]| rows.iter().map(|r| r.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&catalogue), names(&table));
    assert_eq!(table.len(), 58);
}
