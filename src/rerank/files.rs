//! Files of the embedding cache and of the vector files beside it: errors naming them, locks.

use std::fs::File;
use std::path::Path;

use super::{RerankError, Result};

/// The JSON record at `path` (`what` names it in the error); `None` when there is none.
pub fn read_json<T: serde::de::DeserializeOwned>(
    path: &Path,
    what: &str,
) -> Result<Option<T>, RerankError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(cache_err(path, format!("cannot read: {e}"))),
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| cache_err(path, format!("not {what}: {e}")))
}

/// Writes `value` as pretty JSON to `path`, atomically.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), RerankError> {
    let json = serde_json::to_string_pretty(value).expect("records serialize") + "\n";
    crate::formats::atomic::write_atomic(path, json.as_bytes())
        .map_err(|e| cache_err(path, e.to_string()))
}

pub fn cache_err(path: &Path, reason: impl Into<String>) -> RerankError {
    RerankError::Cache {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// An I/O error on one of the cache's files, its source kept.
pub fn io_err(path: &Path, source: std::io::Error) -> RerankError {
    RerankError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Exclusive advisory lock on an open file, released on drop.
/// Holds the descriptor only: the `File` must outlive the lock (declare the lock after it).
pub struct FileLock(std::os::fd::RawFd);

impl FileLock {
    pub(super) fn lock(file: &File, path: &Path) -> Result<Self> {
        use std::os::fd::AsRawFd;
        lock_exclusive(file, path)?;
        Ok(Self(file.as_raw_fd()))
    }
}

/// Takes an exclusive advisory `flock` on `file`, waiting for another holder; it is released by
/// `LOCK_UN` ([`FileLock`]) or when the descriptor is closed (the vector writer).
pub fn lock_exclusive(file: &File, path: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a valid open descriptor has no memory-safety preconditions.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
    if rc == 0 {
        Ok(())
    } else {
        Err(cache_err(
            path,
            format!("cannot lock: {}", std::io::Error::last_os_error()),
        ))
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        // SAFETY: as above; the descriptor is still open (the File outlives the lock).
        unsafe {
            libc::flock(self.0, libc::LOCK_UN);
        }
    }
}
