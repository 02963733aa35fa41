//! `manifest.sha256.json`: every file of a collection directory with its size and SHA-256, written
//! by `convrag index` after its last commit. A collection is a directory that may be copied or
//! mounted read-only on every node; the manifest says whether two copies are the same
//! (`convrag collection verify`), and its digest is what servers sharing a database record and
//! compare before serving the collection.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{io_err, IndexError, Result};

pub const CHECKSUM_FILE: &str = "manifest.sha256.json";

/// Files that change while an index is opened, or are the manifest itself.
fn ignored(name: &str) -> bool {
    name == CHECKSUM_FILE || name.ends_with(".lock") || name.ends_with(".tmp")
}

/// Size and SHA-256 of one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileSum {
    pub bytes: u64,
    pub sha256: String,
}

/// Every file of a collection directory by its `/`-separated relative path.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ChecksumManifest {
    pub files: BTreeMap<String, FileSum>,
}

/// How a directory differs from its manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Difference {
    Missing(String),
    Extra(String),
    Changed(String),
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Difference::Missing(p) => write!(f, "{p}: missing"),
            Difference::Extra(p) => write!(f, "{p}: not in the manifest"),
            Difference::Changed(p) => write!(f, "{p}: size or SHA-256 differs"),
        }
    }
}

impl ChecksumManifest {
    /// Hashes every file under `dir`.
    pub fn compute(dir: &Path) -> Result<Self> {
        let mut files = BTreeMap::new();
        let mut stack = vec![PathBuf::new()];
        while let Some(rel) = stack.pop() {
            let here = dir.join(&rel);
            for entry in std::fs::read_dir(&here).map_err(io_err(&here))? {
                let entry = entry.map_err(io_err(&here))?;
                let name = entry.file_name().to_string_lossy().into_owned();
                let path = rel.join(&name);
                let kind = entry.file_type().map_err(io_err(&entry.path()))?;
                if kind.is_dir() {
                    stack.push(path);
                } else if !ignored(&name) {
                    let key = path.to_string_lossy().replace('\\', "/");
                    files.insert(key, file_sum(&entry.path())?);
                }
            }
        }
        Ok(ChecksumManifest { files })
    }

    /// Reads `dir/manifest.sha256.json`; `None` when the collection has none.
    pub fn read(dir: &Path) -> Result<Option<Self>> {
        let path = dir.join(CHECKSUM_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&path)(e)),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| IndexError::Manifest {
                path,
                message: e.to_string(),
            })
    }

    /// Writes it atomically into `dir`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        Ok(crate::formats::atomic::write_atomic(
            &dir.join(CHECKSUM_FILE),
            self.to_json().as_bytes(),
        )?)
    }

    fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("manifest serializes") + "\n"
    }

    /// SHA-256 of the manifest as written: equal digests, equal collections.
    pub fn digest(&self) -> String {
        hex::encode(Sha256::digest(self.to_json().as_bytes()))
    }

    /// What differs between this manifest and `actual` (the directory now).
    pub fn differences(&self, actual: &ChecksumManifest) -> Vec<Difference> {
        let mut out = Vec::new();
        for (path, sum) in &self.files {
            match actual.files.get(path) {
                None => out.push(Difference::Missing(path.clone())),
                Some(s) if s != sum => out.push(Difference::Changed(path.clone())),
                Some(_) => {}
            }
        }
        for path in actual.files.keys() {
            if !self.files.contains_key(path) {
                out.push(Difference::Extra(path.clone()));
            }
        }
        out
    }
}

/// Rewrites `dir`'s checksum manifest from its files.
pub fn write_checksums(dir: &Path) -> Result<ChecksumManifest> {
    let manifest = ChecksumManifest::compute(dir)?;
    manifest.write(dir)?;
    Ok(manifest)
}

/// The differences between `dir` and its manifest (an error when it has none).
pub fn verify(dir: &Path) -> Result<Vec<Difference>> {
    let recorded = ChecksumManifest::read(dir)?.ok_or_else(|| {
        IndexError::Invalid(format!(
            "{}: no {CHECKSUM_FILE} (index the collection again with `convrag index` to write it)",
            dir.display()
        ))
    })?;
    Ok(recorded.differences(&ChecksumManifest::compute(dir)?))
}

/// Size and SHA-256 of the file at `path`.
pub fn file_sum(path: &Path) -> Result<FileSum> {
    let d = crate::digest::file_sha256(path).map_err(io_err(path))?;
    Ok(FileSum {
        bytes: d.bytes,
        sha256: d.sha256,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_missing_or_extra_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("tantivy")).unwrap();
        std::fs::write(dir.path().join("collection.json"), "{}").unwrap();
        std::fs::write(dir.path().join("tantivy/a.idx"), "abc").unwrap();
        std::fs::write(dir.path().join("tantivy/.tantivy-meta.lock"), "").unwrap();
        let written = write_checksums(dir.path()).unwrap();
        assert_eq!(
            written.files.keys().collect::<Vec<_>>(),
            ["collection.json", "tantivy/a.idx"]
        );
        assert_eq!(written.files["tantivy/a.idx"].bytes, 3);
        assert!(verify(dir.path()).unwrap().is_empty());
        assert_eq!(
            ChecksumManifest::read(dir.path())
                .unwrap()
                .unwrap()
                .digest(),
            written.digest()
        );

        std::fs::write(dir.path().join("tantivy/a.idx"), "abd").unwrap();
        std::fs::write(dir.path().join("tantivy/b.idx"), "").unwrap();
        std::fs::remove_file(dir.path().join("collection.json")).unwrap();
        let found: Vec<String> = verify(dir.path())
            .unwrap()
            .iter()
            .map(|d| d.to_string())
            .collect();
        assert_eq!(
            found,
            [
                "collection.json: missing",
                "tantivy/a.idx: size or SHA-256 differs",
                "tantivy/b.idx: not in the manifest"
            ]
        );
        assert_ne!(
            ChecksumManifest::compute(dir.path()).unwrap().digest(),
            written.digest()
        );
    }
}
