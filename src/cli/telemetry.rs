//! Logging and tracing set-up of the binary: log lines on stderr (text or JSON), and OpenTelemetry
//! traces exported over OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set. The exporter reads the standard `OTEL_*`
//! variables (protocol `http/protobuf`, the default, or `http/json`; headers; timeout);
//! `OTEL_SERVICE_NAME` defaults to `convrag`.

use anyhow::Context;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// How log lines are written.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Flushes exported spans when dropped (at the end of `main`).
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            if let Err(e) = provider.shutdown() {
                eprintln!("warning: exporting the last traces failed: {e}");
            }
        }
    }
}

fn otlp_configured() -> bool {
    [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()))
}

fn otlp_provider() -> anyhow::Result<SdkTracerProvider> {
    use opentelemetry_otlp::WithExportConfig;
    let mut builder = opentelemetry_otlp::SpanExporter::builder().with_http();
    // The specification's default is protobuf; the crate defaults to JSON once its `http-json`
    // feature is on, so the default is set here unless a protocol is asked for.
    let asked = [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()));
    if !asked {
        builder = builder.with_protocol(opentelemetry_otlp::Protocol::HttpBinary);
    }
    let exporter = builder
        .build()
        .context("the OTLP trace exporter (OTEL_EXPORTER_OTLP_*) is unusable")?;
    let mut resource = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("convrag");
    }
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build())
}

/// Installs the global subscriber: `RUST_LOG` filters (default `info,tantivy=warn,hnsw_rs=warn`), lines go to
/// stderr in `format`, spans to the OTLP endpoint when one is configured.
pub fn init(format: LogFormat) -> anyhow::Result<Telemetry> {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,tantivy=warn,hnsw_rs=warn"));
    let lines = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let lines = match format {
        LogFormat::Text => lines.boxed(),
        LogFormat::Json => lines.json().flatten_event(true).boxed(),
    };
    let provider = if otlp_configured() {
        Some(otlp_provider()?)
    } else {
        None
    };
    let traces = provider
        .as_ref()
        .map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer("convrag")));
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(lines)
        .with(traces)
        .try_init();
    Ok(Telemetry { provider })
}
