//! [`Db`], the executor every store statement outside an explicit transaction runs on. Directly
//! against PostgreSQL it is the pool. Through PgBouncer in transaction pooling mode
//! (`?pgbouncer=true` on `DATABASE_URL`) each statement runs in a transaction of its own, as an
//! unnamed statement: sqlx sends Parse (and Sync) before Bind, and outside a transaction
//! PgBouncer may hand the Bind to another server connection, where the statement does not exist.

use futures_util::future::BoxFuture;
use futures_util::stream::{self, BoxStream, StreamExt, TryStreamExt};
use sqlx::postgres::{PgArguments, PgQueryResult, PgRow, PgStatement, PgTypeInfo};
use sqlx::{Describe, Either, Execute, Executor, PgPool, Postgres};

/// The pool, and whether it reaches PostgreSQL through a transaction-pooling PgBouncer.
#[derive(Debug, Clone)]
pub struct Db {
    pool: PgPool,
    pgbouncer: bool,
}

impl Db {
    pub(crate) fn new(pool: PgPool, pgbouncer: bool) -> Self {
        Db { pool, pgbouncer }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// True when statements go through PgBouncer's transaction pooling.
    pub fn pgbouncer(&self) -> bool {
        self.pgbouncer
    }
}

/// A query run as an unnamed statement (never kept on the server connection).
struct Unnamed<E>(E);

impl<'q, E: Execute<'q, Postgres>> Execute<'q, Postgres> for Unnamed<E> {
    fn sql(&self) -> &'q str {
        self.0.sql()
    }
    fn statement(&self) -> Option<&PgStatement<'q>> {
        self.0.statement()
    }
    fn take_arguments(&mut self) -> Result<Option<PgArguments>, sqlx::error::BoxDynError> {
        self.0.take_arguments()
    }
    fn persistent(&self) -> bool {
        false
    }
}

impl<'c> Executor<'c> for &'c Db {
    type Database = Postgres;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<'e, Result<Either<PgQueryResult, PgRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        if !self.pgbouncer {
            return self.pool.fetch_many(query);
        }
        let pool = self.pool.clone();
        // The whole result is read inside the transaction, then handed out.
        let all = async move {
            let mut tx = pool.begin().await?;
            let items: Vec<_> = (&mut *tx).fetch_many(Unnamed(query)).try_collect().await?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(stream::iter(items.into_iter().map(Ok)))
        };
        stream::once(all).try_flatten().boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxFuture<'e, Result<Option<PgRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        if !self.pgbouncer {
            return self.pool.fetch_optional(query);
        }
        let pool = self.pool.clone();
        Box::pin(async move {
            let mut tx = pool.begin().await?;
            let row = (&mut *tx).fetch_optional(Unnamed(query)).await?;
            tx.commit().await?;
            Ok(row)
        })
    }

    fn prepare_with<'e, 'q: 'e>(
        self,
        sql: &'q str,
        parameters: &'e [PgTypeInfo],
    ) -> BoxFuture<'e, Result<PgStatement<'q>, sqlx::Error>>
    where
        'c: 'e,
    {
        self.pool.prepare_with(sql, parameters)
    }

    fn describe<'e, 'q: 'e>(
        self,
        sql: &'q str,
    ) -> BoxFuture<'e, Result<Describe<Postgres>, sqlx::Error>>
    where
        'c: 'e,
    {
        self.pool.describe(sql)
    }
}
