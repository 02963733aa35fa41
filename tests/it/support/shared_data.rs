use std::path::{Path, PathBuf};

/// A file of `../shared/data` (the public data sets beside the repository). Its absence fails
/// the test: CI always has the data, and a test that passed by skipping would hide a broken set-up.
pub fn shared_data(rel: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data")
        .join(rel);
    assert!(
        p.exists(),
        "{} not found: the tests need ../shared/data beside the repository",
        p.display()
    );
    p
}
