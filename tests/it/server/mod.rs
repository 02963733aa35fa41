//! The server as operated: PgBouncer, the embedded cluster, faults.

mod default_vectors;
mod embedded_cluster;
mod metrics;
mod pgbouncer;
mod reliability;
