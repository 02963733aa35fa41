use std::path::{Path, PathBuf};

/// Copies the directory tree `from` into `to` (created), files byte for byte.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A checked-in fixture: `path` below `tests/fixtures`, whose folders are named by file format
/// (`ikat/`, `trec_rag/`, `poleval/`, `jsonl/`, ...).
pub fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(path)
}
