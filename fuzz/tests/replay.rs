//! Replays every committed seed of every fuzz target through the target's function, on the
//! stable toolchain and without libFuzzer: `seeds/<target>/` (and, for `message`, the wire
//! fixtures of `mcp-wire`), read recursively. A target without seeds, or one missing here,
//! fails.

use std::collections::BTreeSet;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn replay(target: &str, run: fn(&[u8]), extra: &[&str]) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut seeds = Vec::new();
    files(&root.join("seeds").join(target), &mut seeds);
    assert!(!seeds.is_empty(), "no seeds for {target}");
    for dir in extra {
        files(&root.join(dir), &mut seeds);
    }
    seeds.sort();
    let mut failed = Vec::new();
    for seed in &seeds {
        let data = std::fs::read(seed).expect("a seed");
        if panic::catch_unwind(AssertUnwindSafe(|| run(&data))).is_err() {
            failed.push(seed.display().to_string());
        }
    }
    assert!(failed.is_empty(), "{target} failed on {failed:#?}");
}

macro_rules! targets {
    ($($target:ident $(+ $extra:literal)*),* $(,)?) => {
        const TARGETS: &[&str] = &[$(stringify!($target)),*];
        $(
            #[test]
            fn $target() {
                replay(stringify!($target), mcp_fuzz::$target, &[$($extra),*]);
            }
        )*
    };
}

targets! {
    binding,
    header_value,
    listener,
    listing,
    message + "../mcp-wire/tests/fixtures",
    negotiation,
    occurrence,
    reply,
    session,
    sse,
    webhook,
    x_mcp_header,
}

/// Every target in `fuzz_targets/` and every directory in `seeds/` is replayed here.
#[test]
fn every_target_is_replayed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let names = |dir: &str| -> BTreeSet<String> {
        std::fs::read_dir(root.join(dir))
            .expect("a directory")
            .map(|e| {
                let path = e.expect("an entry").path();
                let stem = path.file_stem().expect("a name").to_string_lossy();
                stem.into_owned()
            })
            .collect()
    };
    let replayed: BTreeSet<String> = TARGETS.iter().map(|t| (*t).to_owned()).collect();
    assert_eq!(names("fuzz_targets"), replayed);
    assert_eq!(names("seeds"), replayed);
}
