//! Private collections on disk: `<collections>/.private/<user id>/<name>`, a symlink to its
//! current version `.v-<uuid>/`, which holds `documents.jsonl` (every document's extracted text,
//! the source the index is rebuilt from) and the index `<name>/`. A new version is built complete
//! beside the live one and the symlink swapped atomically, so searches see either the old
//! documents or all of the new ones, and a failed build leaves nothing behind.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;

use super::registry::{CollectionRegistry, PRIVATE_DIR};
use super::{index_collection, io_err, IndexOptions, Result};
use crate::collection::documents::Document;
use crate::collection::Format;
use crate::progress::Progress;

const DOCUMENTS_FILE: &str = "documents.jsonl";

impl CollectionRegistry {
    /// Bytes on disk of the shared collection `name` (unreadable entries count as nothing: a
    /// size for a gauge).
    pub fn shared_bytes(&self, name: &str) -> u64 {
        dir_bytes(&self.root().join(name))
    }

    /// Builds a new version of `user_id`'s private collection `name` with its current documents
    /// plus `added`, then makes it the live one. Returns the passages indexed. Blocking.
    pub fn build_private(
        &self,
        user_id: i64,
        name: &str,
        added: &[(String, Document)],
        progress: Option<Arc<dyn Progress>>,
    ) -> Result<u64> {
        build_version(self, user_id, name, added, progress)
    }

    /// Removes a deleted private collection's live symlink and the version it points to.
    pub fn remove_private(&self, user_id: i64, name: &str) -> Result<()> {
        let live = self.private_dir(user_id, name);
        self.forget_private(user_id, name);
        let version = std::fs::read_link(&live)
            .ok()
            .and_then(|target| target.parent().map(|v| self.private_root(user_id).join(v)));
        match std::fs::remove_file(&live) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_err(&live)(e)),
            _ => {}
        }
        if let Some(version) = version {
            // Open searches keep their mapped files until they finish.
            std::fs::remove_dir_all(&version).map_err(io_err(&version))?;
        }
        Ok(())
    }

    /// Removes every private collection file of `user_id`, whose account is deleted.
    pub fn remove_owner(&self, user_id: i64) -> Result<()> {
        let root = self.private_root(user_id);
        for entry in list_dir(&root)? {
            if let Some(name) = entry.file_name().and_then(|n| n.to_str()) {
                if !name.starts_with('.') {
                    self.forget_private(user_id, name);
                }
            }
        }
        match std::fs::remove_dir_all(&root) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_err(&root)(e)),
            _ => Ok(()),
        }
    }

    /// Removes the folders of owners with no private collection, the live symlinks of
    /// collections not in `owned`, the versions (`.v-*`) no remaining symlink points to, and
    /// leftover new symlinks (`.v-*.link`).
    pub fn remove_unused_private(&self, owned: &HashMap<i64, Vec<String>>) -> Result<()> {
        let private_root = self.root().join(PRIVATE_DIR);
        for owner in list_dir(&private_root)? {
            let names = owner
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.parse::<i64>().ok())
                .and_then(|id| owned.get(&id));
            match names {
                Some(names) => remove_unused_in(&owner, names)?,
                None => {
                    std::fs::remove_dir_all(&owner).map_err(io_err(&owner))?;
                    tracing::info!(path = %owner.display(), "removed the collections of a deleted owner");
                }
            }
        }
        Ok(())
    }
}

/// One owner's folder: entries not among `names` (and not versions) go, then the versions no
/// remaining symlink points to.
fn remove_unused_in(owner: &Path, names: &[String]) -> Result<()> {
    let hidden = |p: &Path| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'))
    };
    let mut entries = Vec::new();
    for entry in list_dir(owner)? {
        let known = entry
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| names.iter().any(|name| name == n));
        if hidden(&entry) || known {
            entries.push(entry);
        } else {
            remove_entry(&entry)?;
            tracing::info!(path = %entry.display(), "removed a deleted collection");
        }
    }
    let live: Vec<PathBuf> = entries
        .iter()
        .filter(|p| !hidden(p))
        .filter_map(|p| std::fs::read_link(p).ok())
        .filter_map(|target| target.parent().map(|v| owner.join(v)))
        .collect();
    for entry in entries.iter().filter(|p| hidden(p) && !live.contains(p)) {
        remove_entry(entry)?;
        tracing::info!(path = %entry.display(), "removed an unused collection version");
    }
    Ok(())
}

/// Removes a symlink or file, or a directory with its contents.
fn remove_entry(entry: &Path) -> Result<()> {
    let removed = if entry.is_symlink() || entry.is_file() {
        std::fs::remove_file(entry)
    } else {
        std::fs::remove_dir_all(entry)
    };
    removed.map_err(io_err(entry))
}

/// Bytes of the files under `dir` (unreadable entries count as nothing: a size for a gauge).
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(_) => e.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}

/// The entries of `dir` (none when it does not exist).
fn list_dir(dir: &Path) -> Result<Vec<PathBuf>> {
    match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<_>>()
            .map_err(io_err(dir)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(io_err(dir)(e)),
    }
}

/// Writes a complete new version (documents + index) beside the live one and swaps it in; on
/// any failure the new version is removed and the live one is untouched.
fn build_version(
    registry: &CollectionRegistry,
    user_id: i64,
    name: &str,
    added: &[(String, Document)],
    progress: Option<Arc<dyn Progress>>,
) -> Result<u64> {
    let root = registry.private_root(user_id);
    std::fs::create_dir_all(&root).map_err(io_err(&root))?;
    let version = format!(".v-{}", uuid::Uuid::new_v4().simple());
    let staging = root.join(&version);
    let built = write_version(registry, user_id, name, &staging, added, progress);
    let passages = match built {
        Ok(passages) => passages,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e);
        }
    };
    let live = registry.private_dir(user_id, name);
    let previous = std::fs::read_link(&live).ok();
    // A new symlink renamed over the old one: the swap is atomic.
    let link = root.join(format!("{version}.link"));
    let swapped = std::os::unix::fs::symlink(Path::new(&version).join(name), &link)
        .and_then(|()| std::fs::rename(&link, &live));
    if let Err(e) = swapped {
        let _ = std::fs::remove_file(&link);
        let _ = std::fs::remove_dir_all(&staging);
        return Err(io_err(&live)(e));
    }
    registry.forget_private(user_id, name);
    // The old version: open searches keep their files (mapped) until they finish.
    if let Some(old) = previous.and_then(|p| p.parent().map(Path::to_path_buf)) {
        let old = root.join(old);
        if old != staging {
            let _ = std::fs::remove_dir_all(old);
        }
    }
    Ok(passages)
}

/// The documents file (the live version's documents, then `added`) and its index in `staging`.
fn write_version(
    registry: &CollectionRegistry,
    user_id: i64,
    name: &str,
    staging: &Path,
    added: &[(String, Document)],
    progress: Option<Arc<dyn Progress>>,
) -> Result<u64> {
    std::fs::create_dir_all(staging).map_err(io_err(staging))?;
    let documents = staging.join(DOCUMENTS_FILE);
    let live_documents = registry
        .private_dir(user_id, name)
        .join("..")
        .join(DOCUMENTS_FILE);
    match std::fs::copy(&live_documents, &documents) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::File::create(&documents).map_err(io_err(&documents))?;
        }
        Err(e) => return Err(io_err(&live_documents)(e)),
    }
    append_documents(&documents, added)?;
    let mut options = IndexOptions::new(name, Format::MsmarcoV21Doc);
    options.inputs = vec![documents];
    options.threads = 1;
    options.heap_bytes = 32 << 20;
    if let Some(progress) = progress {
        options.progress = progress;
    }
    let report = index_collection(staging, &options)?;
    Ok(report.passages_total)
}

/// Appends documents as MS MARCO v2.1 document records, which the indexer segments into passages.
fn append_documents(path: &Path, added: &[(String, Document)]) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(io_err(path))?;
    let mut out = String::new();
    for (file_name, doc) in added {
        let unique = uuid::Uuid::new_v4().simple().to_string();
        let docid = format!("{}-{}", slug(file_name), &unique[..8]);
        let record = json!({"docid": docid, "url": file_name, "title": doc.title,
            "headings": doc.headings, "body": doc.text, "kind": doc.kind});
        out.push_str(&record.to_string());
        out.push('\n');
    }
    file.write_all(out.as_bytes()).map_err(io_err(path))?;
    file.sync_all().map_err(io_err(path))
}

/// A file name reduced to letters, digits, '.', '-' and '_' (for passage ids).
fn slug(file_name: &str) -> String {
    let s: String = file_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .take(60)
        .collect();
    s
}
