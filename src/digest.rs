//! SHA-256 of a file, read in blocks: the digest collection manifests, vector sums, run records
//! and model identities all compare, so every one of them must compute it the same way.

use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

/// A file's size in bytes and its SHA-256 as lower-case hex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDigest {
    pub bytes: u64,
    pub sha256: String,
}

/// Reads the file at `path` in 64 KiB blocks (a model or vector file need not fit in memory).
pub fn file_sha256(path: &Path) -> std::io::Result<FileDigest> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut bytes = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        bytes += n as u64;
        hasher.update(&buf[..n]);
    }
    Ok(FileDigest {
        bytes,
        sha256: hex::encode(hasher.finalize()),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn digest_of_a_known_text() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("abc");
        std::fs::write(&path, "abc").unwrap();
        let d = super::file_sha256(&path).unwrap();
        assert_eq!(d.bytes, 3);
        assert_eq!(
            d.sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(super::file_sha256(&dir.path().join("missing")).is_err());
    }
}
