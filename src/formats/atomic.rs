//! Atomic file output: the content goes to a temporary file in the destination's directory,
//! is flushed to disk, then renamed over the destination, so a reader (or a crash) never sees a
//! half-written submission.

use std::io::Write;
use std::path::Path;

use super::{FormatError, Result};

/// Writes `bytes` to `path` atomically, readable by others (0644).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with_mode(path, bytes, 0o644)
}

/// Writes `bytes` to `path` atomically, readable only by its owner (0600): tokens, keys.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with_mode(path, bytes, 0o600)
}

fn write_atomic_with_mode(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let io_err = |source| FormatError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".convrag-tmp-")
        .tempfile_in(dir)
        .map_err(io_err)?;
    tmp.write_all(bytes).map_err(io_err)?;
    // Temporary files are created private (0600); the output gets the mode asked for.
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(io_err)?;
    }
    tmp.as_file().sync_all().map_err(io_err)?;
    tmp.persist(path).map_err(|e| io_err(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_existing_file_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.txt");
        std::fs::write(&path, "old").unwrap();
        write_atomic(&path, b"new content\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new content\n");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644);
    }

    #[test]
    fn missing_directory_names_the_file() {
        let err = write_atomic(Path::new("/nonexistent-dir-xyz/run.txt"), b"x").unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent-dir-xyz/run.txt"),
            "{err}"
        );
    }
}
