//! A database client on one connection, driven line by line, for the tests
//! of the test network (`jobq_tests::net`): it runs where a test puts it (a
//! network namespace) and shows what that host sees of a database.
//!
//! `jobq-net-probe <url>` connects once (MySQL/MariaDB or PostgreSQL), prints
//! `connected`, then for each line of stdin runs it as one SQL statement
//! returning one integer, on that same connection, and prints
//! `ok <value> <microseconds>` or `err <message>`. A line `time <n> <sql>`
//! runs the statement n times and prints `ok <last value> <mean µs>`. It
//! exits when stdin closes.

use std::io::BufRead;
use std::time::Instant;

use sqlx::{Connection, MySqlConnection, PgConnection};

enum Conn {
    MySql(MySqlConnection),
    Postgres(PgConnection),
}

impl Conn {
    async fn connect(url: &str) -> Result<Self, sqlx::Error> {
        if url.starts_with("postgres") {
            Ok(Self::Postgres(PgConnection::connect(url).await?))
        } else {
            Ok(Self::MySql(MySqlConnection::connect(url).await?))
        }
    }

    async fn value(&mut self, sql: &str) -> Result<i64, sqlx::Error> {
        match self {
            Self::MySql(c) => {
                let (v,): (i64,) = sqlx::query_as(sql).fetch_one(c).await?;
                Ok(v)
            }
            Self::Postgres(c) => {
                let (v,): (i64,) = sqlx::query_as(sql).fetch_one(c).await?;
                Ok(v)
            }
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let Some(url) = std::env::args().nth(1) else {
        eprintln!("usage: jobq-net-probe <url>");
        std::process::exit(2);
    };
    let mut conn = match Conn::connect(&url).await {
        Ok(conn) => conn,
        Err(error) => {
            println!("err cannot connect: {error}");
            std::process::exit(1);
        }
    };
    println!("connected");
    let (lines, mut receive) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    while let Some(line) = receive.recv().await {
        let (times, sql) = match line.strip_prefix("time ") {
            Some(rest) => {
                let (n, sql) = rest.split_once(' ').unwrap_or((rest, ""));
                (n.parse::<u32>().unwrap_or(1).max(1), sql.to_owned())
            }
            None => (1, line),
        };
        let start = Instant::now();
        let mut result = Ok(0);
        for _ in 0..times {
            result = conn.value(&sql).await;
            if result.is_err() {
                break;
            }
        }
        match result {
            Ok(v) => println!("ok {v} {}", start.elapsed().as_micros() / u128::from(times)),
            Err(error) => println!("err {error}"),
        }
    }
    std::process::exit(0);
}
