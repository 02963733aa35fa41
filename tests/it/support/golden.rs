use std::path::{Path, PathBuf};

/// Where `tests/golden/<rel>` is, for tests that hand a golden file to the binary.
pub fn golden_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(rel)
}

/// Compares `actual` with `tests/golden/<rel>` byte for byte; `CONVRAG_UPDATE_GOLDEN=1` writes
/// `actual` there instead, to be reviewed as a diff.
pub fn golden(rel: &str, actual: &str) {
    let path = golden_path(rel);
    if std::env::var_os("CONVRAG_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with CONVRAG_UPDATE_GOLDEN=1 to create it)",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "{} differs from the output:\n{actual}",
        path.display()
    );
}

/// The text of `tests/golden/<rel>`, for goldens recorded by other tools (never rewritten).
pub fn golden_text(rel: &str) -> String {
    let path = golden_path(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
