//! Loading the ONNX Runtime shared library once per process.
//!
//! `ort` allows one environment per process, and a wrong file handed to it may abort the process
//! (an old ONNX Runtime with a newer API) instead of returning an error, so the file is checked
//! here first: it must exist, be a 64-bit ELF shared object for this machine, and carry a version
//! `ort` accepts in its name when the name has one.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use ort::environment::Environment;

use super::{RerankError, Result};

/// The ONNX Runtime version this build is made for (`ort` 2.0.0-rc.15 with `api-31`).
pub const EXPECTED_VERSION: &str = "1.31.1";

static ENVIRONMENT: OnceLock<(PathBuf, Environment)> = OnceLock::new();
static INIT_LOCK: Mutex<()> = Mutex::new(());

fn library_error(path: &Path, reason: impl Into<String>) -> RerankError {
    RerankError::Library {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Checks that `path` looks like an ONNX Runtime shared library ort can load, without loading it.
pub fn check_library_file(path: &Path) -> Result<()> {
    let hint = format!(
        "expected libonnxruntime.so.{EXPECTED_VERSION} (run scripts/fetch-models.sh, or set ORT_DYLIB_PATH)"
    );
    let meta = std::fs::metadata(path)
        .map_err(|e| library_error(path, format!("cannot read it ({e}); {hint}")))?;
    if !meta.is_file() {
        return Err(library_error(path, format!("not a regular file; {hint}")));
    }
    let mut header = [0u8; 20];
    let mut file = std::fs::File::open(path)
        .map_err(|e| library_error(path, format!("cannot open it ({e}); {hint}")))?;
    let n = read_up_to(&mut file, &mut header)
        .map_err(|e| library_error(path, format!("cannot read it ({e}); {hint}")))?;
    if n < header.len() || &header[..4] != b"\x7fELF" {
        return Err(library_error(
            path,
            format!("not an ELF shared library; {hint}"),
        ));
    }
    if header[4] != 2 {
        return Err(library_error(
            path,
            format!("not a 64-bit ELF file; {hint}"),
        ));
    }
    // e_type (offset 16): 3 = shared object.
    let e_type = u16::from_le_bytes([header[16], header[17]]);
    if e_type != 3 {
        return Err(library_error(
            path,
            format!("ELF file is not a shared object (type {e_type}); {hint}"),
        ));
    }
    let e_machine = u16::from_le_bytes([header[18], header[19]]);
    let expected_machine: Option<u16> = if cfg!(target_arch = "x86_64") {
        Some(62)
    } else if cfg!(target_arch = "aarch64") {
        Some(183)
    } else {
        None
    };
    if let Some(m) = expected_machine {
        if e_machine != m {
            return Err(library_error(
                path,
                format!("built for another CPU architecture (ELF machine {e_machine}); {hint}"),
            ));
        }
    }
    // An older ONNX Runtime may abort inside ort instead of failing cleanly: refuse versions that the
    // file name itself shows to be older than 1.31.
    if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
        if let Some(version) = name.split(".so.").nth(1) {
            let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
            if let (Some(Some(major)), Some(Some(minor))) = (parts.next(), parts.next()) {
                if (major, minor) < (1, 31) {
                    return Err(library_error(
                        path,
                        format!("ONNX Runtime {version} is too old; {hint}"),
                    ));
                }
            }
        }
    }
    Ok(())
}

fn read_up_to(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        let n = file.read(&mut buf[filled..])?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    Ok(filled)
}

/// The process's ONNX Runtime environment, loading the library from `path` on first use.
///
/// A later call with another path fails (ONNX Runtime cannot be loaded twice into one process).
pub fn environment(path: &Path) -> Result<Environment> {
    // The file is checked first, even when a library is already loaded: a missing or malformed
    // path is reported as such, whatever was loaded before.
    check_library_file(path)?;
    if let Some((loaded, env)) = ENVIRONMENT.get() {
        return same_library(loaded, path).map(|_| env.clone());
    }
    let _guard = INIT_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((loaded, env)) = ENVIRONMENT.get() {
        return same_library(loaded, path).map(|_| env.clone());
    }
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let builder = ort::init_from(&absolute).map_err(|e| library_error(path, e.to_string()))?;
    let env = builder.with_name("convrag").build().map_err(|e| {
        library_error(
            path,
            format!("cannot create the ONNX Runtime environment: {e}"),
        )
    })?;
    let _ = ENVIRONMENT.set((absolute, env.clone()));
    Ok(env)
}

fn same_library(loaded: &Path, requested: &Path) -> Result<()> {
    let requested_abs = std::path::absolute(requested).unwrap_or_else(|_| requested.to_path_buf());
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    if canon(loaded) == canon(&requested_abs) {
        Ok(())
    } else {
        Err(library_error(
            requested,
            format!(
                "ONNX Runtime is already loaded from {} in this process; one library per process",
                loaded.display()
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_library_names_path_and_expectation() {
        let err =
            check_library_file(Path::new("/nonexistent/libonnxruntime.so.1.31.1")).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("/nonexistent/libonnxruntime.so.1.31.1"),
            "{text}"
        );
        assert!(text.contains("fetch-models.sh"), "{text}");
    }

    #[test]
    fn text_file_is_not_a_library() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("libonnxruntime.so.1.31.1");
        std::fs::write(&path, "this is not a library, just text of some length").unwrap();
        let text = check_library_file(&path).unwrap_err().to_string();
        assert!(text.contains("not an ELF shared library"), "{text}");
    }

    #[test]
    fn old_version_in_name_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("libonnxruntime.so.1.22.0");
        // A minimal ELF64 shared-object header for this machine, so only the version check fires.
        let mut header = vec![0u8; 64];
        header[..4].copy_from_slice(b"\x7fELF");
        header[4] = 2;
        header[16..18].copy_from_slice(&3u16.to_le_bytes());
        let machine: u16 = if cfg!(target_arch = "aarch64") {
            183
        } else {
            62
        };
        header[18..20].copy_from_slice(&machine.to_le_bytes());
        std::fs::write(&path, &header).unwrap();
        let text = check_library_file(&path).unwrap_err().to_string();
        assert!(text.contains("too old"), "{text}");
    }
}
