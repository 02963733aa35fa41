//! Ingestion: reads input shards in parallel, analyzes and writes them with tantivy's
//! multi-threaded writer under a bounded heap, and commits after each batch of shards with the
//! list of committed shards in the commit payload, so an interrupted run resumes where the last
//! commit left off (committed shards are skipped; nothing committed is lost).

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tantivy::schema::TantivyDocument;
use tantivy::IndexWriter;

use crate::progress::{no_progress, SharedProgress};

use super::{
    build_schema, committed_state, io_err, read_manifest, register_analyzers, tantivy_err,
    validate_name, write_manifest, Bm25Params, CommitState, ContentsPart, FieldWeights, Fields,
    IndexError, Language, Manifest, Result, ShardState, PASSAGE_LAYOUT, TANTIVY_DIR,
};
use crate::collection::{
    list_inputs, read_file, BadRecord, Format, InputFile, Item, ReadOptions, Record,
    SegmenterConfig,
};

/// Everything `convrag index` can be told.
#[derive(Debug, Clone)]
pub struct IndexOptions {
    pub name: String,
    pub format: Format,
    pub language: Language,
    pub inputs: Vec<PathBuf>,
    pub strict: bool,
    /// Reader threads and tantivy indexing threads (each).
    pub threads: usize,
    /// Total indexing heap of tantivy's writer, in bytes (split among its threads).
    pub heap_bytes: usize,
    pub segmenter: SegmenterConfig,
    pub bm25: Bm25Params,
    pub weights: FieldWeights,
    pub contents: Vec<ContentsPart>,
    /// Commit after at least this many input bytes (besides after every `threads` shards).
    pub commit_bytes: u64,
    /// Merge all segments into one at the end.
    pub optimize: bool,
    /// Where input bytes read and passages indexed are reported.
    pub progress: SharedProgress,
    /// How many bad records are printed (all are counted).
    pub max_reported: u64,
}

impl IndexOptions {
    pub fn new(name: &str, format: Format) -> Self {
        Self {
            name: name.to_string(),
            format,
            language: Language::English,
            inputs: Vec::new(),
            strict: false,
            threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            heap_bytes: 512 << 20,
            segmenter: SegmenterConfig::default(),
            bm25: Bm25Params::default(),
            weights: FieldWeights::for_format(format),
            contents: vec![ContentsPart::Title, ContentsPart::Text],
            commit_bytes: 1 << 30,
            optimize: false,
            progress: no_progress(),
            max_reported: 20,
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IndexReport {
    pub shards_indexed: usize,
    pub shards_skipped: usize,
    pub passages_added: u64,
    pub bad_records: u64,
    pub duplicates: u64,
    /// Bad records as reported (at most `max_reported`).
    pub reported: Vec<BadRecord>,
    pub passages_total: u64,
    pub input_bytes: u64,
    pub seconds: f64,
}

fn id_hash(id: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    id.hash(&mut h);
    h.finish()
}

/// Ids already in the collection, as 64-bit hashes (8 bytes + table overhead per passage; a hash
/// collision, about 1 in 3,000 at 113M passages, would wrongly skip one passage as a duplicate).
struct SeenIds {
    shards: Vec<Mutex<HashSet<u64>>>,
}

impl SeenIds {
    fn new() -> Self {
        Self {
            shards: (0..64).map(|_| Mutex::new(HashSet::new())).collect(),
        }
    }
    fn insert(&self, id: &str) -> bool {
        let h = id_hash(id);
        self.shards[(h % 64) as usize]
            .lock()
            .expect("id set lock")
            .insert(h)
    }
}

/// Creates the collection if needed and indexes `opts.inputs` into it.
pub fn index_collection(collections_dir: &Path, opts: &IndexOptions) -> Result<IndexReport> {
    validate_name(&opts.name)?;
    let started = Instant::now();
    let dir = collections_dir.join(&opts.name);
    let tdir = dir.join(TANTIVY_DIR);
    let (index, mut manifest) = open_or_create(&dir, opts)?;
    register_analyzers(&index);
    let fields = Fields::from_schema(&index.schema())?;
    let mut state = committed_state(&index, &dir)?;

    let inputs = list_inputs(opts.format, &opts.inputs)?;
    let key = |f: &InputFile| canonical(&f.path);
    let done: HashSet<(String, u64)> = state
        .shards
        .iter()
        .map(|s| (s.path.clone(), s.size))
        .collect();
    let (todo, skipped): (Vec<InputFile>, Vec<InputFile>) = inputs
        .into_iter()
        .partition(|f| !done.contains(&(key(f), f.size)));
    let mut report = IndexReport {
        shards_skipped: skipped.len(),
        ..Default::default()
    };
    for s in &skipped {
        tracing::info!("{}: already committed, skipped", s.path.display());
    }

    let threads = opts.threads.max(1);
    if !todo.is_empty() {
        let heap = opts.heap_bytes.max((threads * 16) << 20);
        let mut writer: IndexWriter<TantivyDocument> = index
            .writer_with_num_threads(threads, heap)
            .map_err(tantivy_err(&tdir))?;
        let seen = Arc::new(SeenIds::new());
        if !state.shards.is_empty() {
            load_existing_ids(&index, fields, &seen, &dir)?;
        }
        let total_bytes: u64 = todo.iter().map(|f| f.size).sum();
        report.input_bytes = total_bytes;
        let bytes_read = Arc::new(AtomicU64::new(0));
        let passages = Arc::new(AtomicU64::new(0));
        let ticker = Ticker::start(
            opts.progress.clone(),
            total_bytes,
            bytes_read.clone(),
            passages.clone(),
        );

        let batches = commit_batches(todo, threads, opts.commit_bytes);

        let result = (|| -> Result<()> {
            for batch in batches {
                let outcomes = index_batch(
                    &writer,
                    fields,
                    opts,
                    &batch,
                    &seen,
                    &bytes_read,
                    &passages,
                    &mut report,
                )?;
                for (file, shard) in batch.iter().zip(outcomes) {
                    state.passages += shard.passages;
                    state.bad_records += shard.bad_records;
                    state.duplicates += shard.duplicates;
                    report.passages_added += shard.passages;
                    report.bad_records += shard.bad_records;
                    report.duplicates += shard.duplicates;
                    state.shards.push(ShardState {
                        path: key(file),
                        size: file.size,
                        passages: shard.passages,
                        bad_records: shard.bad_records + shard.duplicates,
                    });
                    report.shards_indexed += 1;
                }
                let payload = serde_json::to_string(&state).expect("state serializes");
                let mut prepared = writer.prepare_commit().map_err(tantivy_err(&tdir))?;
                prepared.set_payload(&payload);
                prepared.commit().map_err(tantivy_err(&tdir))?;
                manifest.state = state.clone();
                write_manifest(&dir, &manifest)?;
            }
            Ok(())
        })();
        ticker.finish();
        if let Err(e) = result {
            // Uncommitted documents are dropped; committed shards stay.
            let _ = writer.rollback();
            return Err(e);
        }
        writer.wait_merging_threads().map_err(tantivy_err(&tdir))?;
    }
    if opts.optimize {
        merge_all(&index, &dir)?;
    }
    manifest.state = committed_state(&index, &dir)?;
    write_manifest(&dir, &manifest)?;
    super::impacts::write_impacts(&dir, &index)?;
    // Last, once no file of the directory changes any more.
    super::checksum::write_checksums(&dir)?;
    report.passages_total = manifest.state.passages;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// The collection's index and manifest: opened when it exists (and was built with the same
/// format and language), else created empty.
fn open_or_create(dir: &Path, opts: &IndexOptions) -> Result<(tantivy::Index, Manifest)> {
    let tdir = dir.join(TANTIVY_DIR);
    if tdir.join("meta.json").exists() {
        let manifest = read_manifest(dir)?;
        if manifest.format != opts.format || manifest.language != opts.language {
            return Err(IndexError::Invalid(format!(
                "collection {:?} was built as format {} / language {:?}; this run asks for {} / {:?}",
                opts.name, manifest.format, manifest.language, opts.format, opts.language
            )));
        }
        if manifest.layout != PASSAGE_LAYOUT {
            return Err(IndexError::Invalid(format!(
                "collection {:?} was built with passage layout {}; this version writes layout {}: remove {} and index again",
                opts.name,
                manifest.layout,
                PASSAGE_LAYOUT,
                dir.display()
            )));
        }
        let index = tantivy::Index::open_in_dir(&tdir).map_err(tantivy_err(&tdir))?;
        Ok((index, manifest))
    } else {
        std::fs::create_dir_all(&tdir).map_err(io_err(&tdir))?;
        let manifest = Manifest {
            name: opts.name.clone(),
            format: opts.format,
            language: opts.language,
            bm25: opts.bm25,
            weights: opts.weights,
            contents: opts.contents.clone(),
            segmenter: opts.segmenter.clone(),
            created: chrono::Utc::now().to_rfc3339(),
            state: CommitState::default(),
            layout: PASSAGE_LAYOUT,
        };
        let index = tantivy::Index::create_in_dir(&tdir, build_schema(opts.language))
            .map_err(tantivy_err(&tdir))?;
        write_manifest(dir, &manifest)?;
        Ok((index, manifest))
    }
}

/// Batches: at least `threads` shards, and at least `commit_bytes` of input (unless the inputs
/// run out), so small files do not cost one commit each.
fn commit_batches(todo: Vec<InputFile>, threads: usize, commit_bytes: u64) -> Vec<Vec<InputFile>> {
    let mut batches: Vec<Vec<InputFile>> = Vec::new();
    let mut cur: Vec<InputFile> = Vec::new();
    let mut cur_bytes = 0u64;
    for f in todo {
        cur_bytes += f.size;
        cur.push(f);
        if cur.len() >= threads && cur_bytes >= commit_bytes {
            batches.push(std::mem::take(&mut cur));
            cur_bytes = 0;
        }
    }
    if !cur.is_empty() {
        batches.push(cur);
    }
    batches
}

/// Merges all segments into one, removes the files no longer used, and rewrites the impacts
/// and the checksum manifest of the new files.
pub fn optimize(index: &tantivy::Index, dir: &Path) -> Result<()> {
    merge_all(index, dir)?;
    super::impacts::write_impacts(dir, index)?;
    super::checksum::write_checksums(dir)?;
    Ok(())
}

fn merge_all(index: &tantivy::Index, dir: &Path) -> Result<()> {
    let tdir = dir.join(TANTIVY_DIR);
    let mut writer: IndexWriter<TantivyDocument> = index
        .writer_with_num_threads(1, 64 << 20)
        .map_err(tantivy_err(&tdir))?;
    let ids = index.searchable_segment_ids().map_err(tantivy_err(&tdir))?;
    if ids.len() > 1 {
        writer.merge(&ids).wait().map_err(tantivy_err(&tdir))?;
    }
    writer
        .garbage_collect_files()
        .wait()
        .map_err(tantivy_err(&tdir))?;
    writer.wait_merging_threads().map_err(tantivy_err(&tdir))?;
    Ok(())
}

fn canonical(p: &Path) -> String {
    std::fs::canonicalize(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .to_string_lossy()
        .into_owned()
}

fn load_existing_ids(
    index: &tantivy::Index,
    fields: Fields,
    seen: &SeenIds,
    dir: &Path,
) -> Result<()> {
    let reader = index.reader().map_err(tantivy_err(dir))?;
    let searcher = reader.searcher();
    for seg in searcher.segment_readers() {
        let inv = seg.inverted_index(fields.id).map_err(tantivy_err(dir))?;
        let mut stream = inv.terms().stream().map_err(io_err(dir))?;
        while stream.advance() {
            seen.insert(&String::from_utf8_lossy(stream.key()));
        }
    }
    Ok(())
}

#[derive(Default, Clone, Copy)]
struct ShardOutcome {
    passages: u64,
    bad_records: u64,
    duplicates: u64,
}

#[allow(clippy::too_many_arguments)]
fn index_batch(
    writer: &IndexWriter<TantivyDocument>,
    fields: Fields,
    opts: &IndexOptions,
    batch: &[InputFile],
    seen: &SeenIds,
    bytes_read: &Arc<AtomicU64>,
    passages: &AtomicU64,
    report: &mut IndexReport,
) -> Result<Vec<ShardOutcome>> {
    let next = AtomicU64::new(0);
    let abort = AtomicBool::new(false);
    let outcomes: Mutex<Vec<ShardOutcome>> = Mutex::new(vec![ShardOutcome::default(); batch.len()]);
    let first_error: Mutex<Option<IndexError>> = Mutex::new(None);
    let reported: Mutex<Vec<BadRecord>> = Mutex::new(Vec::new());
    let workers = opts.threads.max(1).min(batch.len());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                if abort.load(Ordering::Relaxed) {
                    return;
                }
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                if i >= batch.len() {
                    return;
                }
                let file = &batch[i];
                let read_opts = ReadOptions {
                    segmenter: opts.segmenter.clone(),
                    root: Some(file.root.clone()),
                    bytes_read: Some(bytes_read.clone()),
                };
                let mut out = ShardOutcome::default();
                let on_bad = |b: BadRecord,
                              out: &mut ShardOutcome,
                              dup: bool|
                 -> crate::collection::Result<()> {
                    if opts.strict {
                        return Err(b.into_error());
                    }
                    if dup {
                        out.duplicates += 1;
                    } else {
                        out.bad_records += 1;
                    }
                    let mut r = reported.lock().expect("report lock");
                    if (r.len() as u64) < opts.max_reported {
                        tracing::warn!("skipped bad record: {b}");
                        r.push(b);
                    }
                    Ok(())
                };
                let res = read_file(opts.format, &file.path, &read_opts, &mut |item| {
                    if abort.load(Ordering::Relaxed) {
                        return Err(crate::collection::CollectionError::Other("aborted".into()));
                    }
                    match item {
                        Item::Bad(b) => on_bad(b, &mut out, false),
                        Item::Record { line, record } => {
                            if !seen.insert(&record.id) {
                                let b = BadRecord {
                                    path: file.path.clone(),
                                    line,
                                    reason: format!("duplicate id {:?}", record.id),
                                };
                                return on_bad(b, &mut out, true);
                            }
                            let doc = to_document(fields, &opts.contents, record);
                            writer.add_document(doc).map_err(|e| {
                                crate::collection::CollectionError::Other(format!("indexing: {e}"))
                            })?;
                            out.passages += 1;
                            passages.fetch_add(1, Ordering::Relaxed);
                            Ok(())
                        }
                    }
                });
                match res {
                    Ok(()) => outcomes.lock().expect("outcome lock")[i] = out,
                    Err(e) => {
                        let mut fe = first_error.lock().expect("error lock");
                        if fe.is_none() && !abort.load(Ordering::Relaxed) {
                            *fe = Some(e.into());
                        }
                        abort.store(true, Ordering::Relaxed);
                        return;
                    }
                }
            });
        }
    });
    report
        .reported
        .extend(reported.into_inner().expect("report lock"));
    if let Some(e) = first_error.into_inner().expect("error lock") {
        return Err(e);
    }
    Ok(outcomes.into_inner().expect("outcome lock"))
}

/// Builds the tantivy document of a record. `body` concatenates the configured parts.
pub fn to_document(fields: Fields, contents: &[ContentsPart], r: Record) -> TantivyDocument {
    let mut doc = TantivyDocument::default();
    let mut body = String::with_capacity(r.title.len() + r.headings.len() + r.text.len() + 2);
    for part in contents {
        let s = match part {
            ContentsPart::Title => &r.title,
            ContentsPart::Headings => &r.headings,
            ContentsPart::Text => &r.text,
        };
        if !s.is_empty() {
            if !body.is_empty() {
                body.push('\n');
            }
            body.push_str(s);
        }
    }
    doc.add_text(fields.id, &r.id);
    doc.add_text(fields.body, &body);
    if !r.title.is_empty() {
        doc.add_text(fields.title, &r.title);
    }
    if !r.headings.is_empty() {
        doc.add_text(fields.headings, &r.headings);
    }
    doc.add_text(fields.text, &r.text);
    if !r.url.is_empty() {
        doc.add_text(fields.url, &r.url);
    }
    if let Some(d) = &r.doc_id {
        doc.add_text(fields.doc_id, d);
    }
    if let Some(s) = r.start_char {
        doc.add_u64(fields.start_char, s);
    }
    if let Some(e) = r.end_char {
        doc.add_u64(fields.end_char, e);
    }
    if let Some(m) = &r.meta {
        doc.add_text(fields.meta, m);
    }
    doc
}

/// Reports input bytes read and passages/s from the shared counters, every 250 ms, on its own
/// thread (the readers only bump atomics).
struct Ticker {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Ticker {
    fn start(
        progress: SharedProgress,
        total: u64,
        bytes: Arc<AtomicU64>,
        records: Arc<AtomicU64>,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        progress.set_length(total);
        let s = stop.clone();
        let handle = std::thread::spawn(move || {
            let started = Instant::now();
            loop {
                let done = s.load(Ordering::Relaxed);
                let n = records.load(Ordering::Relaxed);
                let secs = started.elapsed().as_secs_f64().max(1e-3);
                progress.set_position(bytes.load(Ordering::Relaxed));
                progress.set_message(format!("{n} passages, {:.0} passages/s", n as f64 / secs));
                if done {
                    progress.finish();
                    return;
                }
                std::thread::sleep(Duration::from_millis(250));
            }
        });
        Self {
            stop,
            handle: Some(handle),
        }
    }

    fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
