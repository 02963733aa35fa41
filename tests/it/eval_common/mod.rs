//! Helpers shared by the eval integration tests.
#![allow(dead_code)]

use std::ffi::OsString;
use std::process::Command;

/// Runs `convrag eval <args>` (the binary), writing the output with `-o` to a temporary file
/// (the atomic writer). Err carries what the binary printed on standard error.
pub fn convrag_eval<I, S>(args: I) -> Result<String, String>
where
    I: IntoIterator<Item = S>,
    S: Into<OsString>,
{
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.txt");
    let output = Command::new(env!("CARGO_BIN_EXE_convrag"))
        .arg("eval")
        .args(args.into_iter().map(Into::into))
        .arg("-o")
        .arg(&out)
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr)
            .trim_end()
            .to_string());
    }
    Ok(std::fs::read_to_string(&out).unwrap())
}
