//! Load against running daemons' HTTP APIs, for `scripts/scale.py` (or by hand): seeding many
//! users' memories, concurrent searches, concurrent ingest, and how soon a memory one daemon
//! applied is found through another. Prints one JSON object per command on stdout.
//!
//! ```text
//! load-bench seed      --database URL --users N --memories M [--prefix s]
//! load-bench search    --urls URL[,URL…] --clients C --seconds S --users N [--prefix s]
//! load-bench ingest    --urls URL[,URL…] --clients C --seconds S [--turns T] [--bad-every K]
//! load-bench freshness --write-url URL --read-url URL [--samples N] [--timeout-secs S]
//! ```
//! The token is read from `MEMSIFT_API_TOKEN`. `seed` writes M memories over N users (Zipf-like:
//! a few users hold thousands, most a few dozen), each a sentence over a fixed vocabulary with a
//! random unit vector stored under the hashing embedder's model id, so the daemons must run with
//! `[embeddings] backend = "hashing"`; the figures are the read side's, not a model's. `search`
//! draws users Zipf-like, counts a user's first search through a daemon as cold (its indexes are
//! read from the database) and the rest as warm. `ingest` posts whole conversations (each message
//! with an id, the last closing the segment) to random users, re-sends one in fifty (which must add
//! nothing) and, with `--bad-every K`, sends every K-th post malformed (which must be refused with
//! 400 and store nothing).

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use chrono::Utc;
use memsift_engine::testing::{Noise, word};
use memsift_store::{Store, StoreOptions};
use serde_json::{Value, json};

const USAGE: &str = "usage: load-bench seed|search|ingest|freshness [--option value …] (see the file's header)";

/// `--name value` pairs.
struct Options(BTreeMap<String, String>);

impl Options {
    fn parse(args: &[String]) -> anyhow::Result<Options> {
        let mut map = BTreeMap::new();
        let mut rest = args.iter();
        while let Some(name) = rest.next() {
            let Some(name) = name.strip_prefix("--") else {
                bail!("`{name}` is not an option; {USAGE}");
            };
            let value = rest.next().with_context(|| format!("--{name} needs a value"))?;
            map.insert(name.to_owned(), value.clone());
        }
        Ok(Options(map))
    }

    fn text(&self, name: &str, default: Option<&str>) -> anyhow::Result<String> {
        match (self.0.get(name), default) {
            (Some(value), _) => Ok(value.clone()),
            (None, Some(default)) => Ok(default.to_owned()),
            (None, None) => bail!("--{name} is required; {USAGE}"),
        }
    }

    fn number(&self, name: &str, default: Option<u64>) -> anyhow::Result<u64> {
        let text = self.text(name, default.map(|value| value.to_string()).as_deref())?;
        text.parse()
            .with_context(|| format!("--{name} {text}: not a whole number"))
    }

    fn urls(&self) -> anyhow::Result<Vec<String>> {
        self.text("urls", None)?
            .split(',')
            .map(|url| {
                url::Url::parse(url).with_context(|| format!("--urls: `{url}` is not a URL; use http://HOST:PORT"))?;
                Ok(url.trim_end_matches('/').to_owned())
            })
            .collect()
    }
}

/// A Zipf-like pick in `0..n`: low indexes far more often than high ones.
fn zipf(noise: &mut Noise, n: usize) -> usize {
    let u = (noise.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    ((n as f64).powf(u) as usize).saturating_sub(1).min(n - 1)
}

/// Words of a small vocabulary, a few common and most rare (as search-bench's memories).
fn sentence(noise: &mut Noise, vocabulary: &[String], n_words: usize) -> String {
    let words: Vec<&str> = (0..n_words)
        .map(|_| vocabulary[zipf(noise, vocabulary.len())].as_str())
        .collect();
    words.join(" ") + "."
}

fn vocabulary() -> Vec<String> {
    let mut noise = Noise(0x2545_f491_4f6c_dd1d);
    (0..2000).map(|_| word(&mut noise)).collect()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn latency_figures(mut latencies_ms: Vec<f64>) -> Value {
    latencies_ms.sort_by(f64::total_cmp);
    json!({
        "n": latencies_ms.len(),
        "p50_ms": percentile(&latencies_ms, 0.50),
        "p95_ms": percentile(&latencies_ms, 0.95),
        "p99_ms": percentile(&latencies_ms, 0.99),
        "max_ms": latencies_ms.last().copied().unwrap_or(0.0),
    })
}

/// How many memories each of `users` users gets: at least ten each, the rest Zipf-like.
fn memories_per_user(noise: &mut Noise, users: usize, memories: usize) -> Vec<usize> {
    let floor = 10.min(memories / users.max(1));
    let mut counts = vec![floor; users];
    for _ in 0..memories.saturating_sub(floor * users) {
        counts[zipf(noise, users)] += 1;
    }
    counts
}

async fn seed(options: &Options) -> anyhow::Result<Value> {
    let url = options.text("database", None)?;
    let users = options.number("users", None)? as usize;
    let memories = options.number("memories", None)? as usize;
    let prefix = options.text("prefix", Some("s"))?;
    let store = Store::connect(&url, &StoreOptions::default())
        .await
        .with_context(|| format!("cannot open {}", memsift_store::redact(&url)))?;
    store.migrate().await?;
    let vocabulary = Arc::new(vocabulary());
    let mut noise = Noise(0x9e37_79b9_7f4a_7c15);
    let counts = memories_per_user(&mut noise, users, memories);
    let started = Instant::now();
    let next_user = Arc::new(Mutex::new(0_usize));
    let counts = Arc::new(counts);
    let mut writers = tokio::task::JoinSet::new();
    for writer in 0..4_u64 {
        let (store, vocabulary, next_user, counts, prefix) = (
            store.clone(),
            Arc::clone(&vocabulary),
            Arc::clone(&next_user),
            Arc::clone(&counts),
            prefix.clone(),
        );
        writers.spawn(async move {
            let mut noise = Noise(0x51_7cc1_b727_220a ^ (writer + 1));
            loop {
                let user_index = {
                    let mut next = next_user.lock().expect("not poisoned");
                    let index = *next;
                    *next += 1;
                    index
                };
                let Some(&count) = counts.get(user_index) else {
                    return anyhow::Ok(());
                };
                let rows: Vec<(String, Vec<f32>)> = (0..count)
                    .map(|_| {
                        let n_words = 6 + noise.below(10);
                        let vector = (0..memsift_embed::HASHING_DIMENSION).map(|_| noise.unit()).collect();
                        (sentence(&mut noise, &vocabulary, n_words), vector)
                    })
                    .collect();
                store
                    .insert_bench_memories(
                        &format!("{prefix}{user_index:05}"),
                        memsift_embed::HASHING_MODEL_ID,
                        &rows,
                        Utc::now(),
                    )
                    .await?;
            }
        });
    }
    while let Some(done) = writers.join_next().await {
        done??;
    }
    let secs = started.elapsed().as_secs_f64();
    store.close().await;
    Ok(json!({
        "users": users,
        "memories": counts.iter().sum::<usize>(),
        "most_in_one_user": counts.iter().max(),
        "secs": secs,
    }))
}

fn client() -> anyhow::Result<(reqwest::Client, String)> {
    let token = std::env::var("MEMSIFT_API_TOKEN").context("set MEMSIFT_API_TOKEN to the daemons' API token")?;
    memsift_llm::install_crypto_provider();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .pool_max_idle_per_host(64)
        .build()?;
    Ok((client, token))
}

/// Per-status error counts and latencies, shared by the clients of one run.
#[derive(Default)]
struct Tally {
    warm_ms: Vec<f64>,
    cold_ms: Vec<f64>,
    errors: BTreeMap<String, u64>,
}

async fn search(options: &Options) -> anyhow::Result<Value> {
    let urls = options.urls()?;
    let clients = options.number("clients", Some(32))?;
    let seconds = options.number("seconds", Some(30))?;
    let users = options.number("users", None)? as usize;
    let prefix = options.text("prefix", Some("s"))?;
    let (http, token) = client()?;
    let vocabulary = Arc::new(vocabulary());
    // (daemon, user) pairs searched before: the first search of a user through a daemon is cold.
    let seen: Arc<Mutex<HashSet<(usize, usize)>>> = Arc::default();
    let tally: Arc<Mutex<Tally>> = Arc::default();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = tokio::task::JoinSet::new();
    for client_index in 0..clients {
        let (http, token, urls, vocabulary, seen, tally, prefix) = (
            http.clone(),
            token.clone(),
            urls.clone(),
            Arc::clone(&vocabulary),
            Arc::clone(&seen),
            Arc::clone(&tally),
            prefix.clone(),
        );
        tasks.spawn(async move {
            let mut noise = Noise(0xa076_1d64_78bd_642f ^ (client_index + 1));
            while Instant::now() < deadline {
                // Popular users are spread over the id range rather than the lowest ids (which
                // seeding gave the most memories).
                let rank = zipf(&mut noise, users);
                let user_index = (rank * 7919) % users;
                let daemon = noise.below(urls.len());
                let cold = seen.lock().expect("not poisoned").insert((daemon, user_index));
                let n_words = 2 + noise.below(4);
                let query = sentence(&mut noise, &vocabulary, n_words);
                let url = format!("{}/v1/users/{prefix}{user_index:05}/memories/search", urls[daemon]);
                let url = url::Url::parse_with_params(&url, &[("q", query.as_str()), ("k", "10")]);
                let started = Instant::now();
                let url = url.expect("the base URL was checked at start and the path is ours");
                let answer = http.get(url).bearer_auth(&token).send().await;
                let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
                let mut tally = tally.lock().expect("not poisoned");
                match answer {
                    Ok(response) if response.status().is_success() => {
                        if cold {
                            tally.cold_ms.push(elapsed_ms);
                        } else {
                            tally.warm_ms.push(elapsed_ms);
                        }
                    }
                    Ok(response) => *tally.errors.entry(response.status().as_u16().to_string()).or_default() += 1,
                    Err(error) => *tally.errors.entry(format!("transport: {error}")).or_default() += 1,
                }
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done?;
    }
    let tally = std::mem::take(&mut *tally.lock().expect("not poisoned"));
    let n_searches = tally.warm_ms.len() + tally.cold_ms.len();
    let all: Vec<f64> = tally.warm_ms.iter().chain(&tally.cold_ms).copied().collect();
    Ok(json!({
        "clients": clients,
        "daemons": urls.len(),
        "searches_per_sec": n_searches as f64 / seconds as f64,
        "warm": latency_figures(tally.warm_ms),
        "cold": latency_figures(tally.cold_ms),
        "all": latency_figures(all),
        "errors": tally.errors,
    }))
}

/// One conversation as the API takes it: `turns` messages with ids, the last closing the segment.
fn conversation(noise: &mut Noise, conversation_id: &str, turns: usize) -> Value {
    let start = Utc::now() - chrono::Duration::hours(1);
    let messages: Vec<Value> = (0..turns)
        .map(|turn| {
            let content = if turn % 2 == 0 {
                format!(
                    "I moved to {} in {} and my sister {} lives there too.",
                    word(noise),
                    1990 + noise.below(35),
                    word(noise)
                )
            } else {
                "Noted.".to_owned()
            };
            json!({
                "conversation": conversation_id,
                "id": format!("{conversation_id}-{turn}"),
                "role": if turn % 2 == 0 { "user" } else { "assistant" },
                "content": content,
                "timestamp": (start + chrono::Duration::seconds(turn as i64)).to_rfc3339(),
                "boundary": turn + 1 == turns,
            })
        })
        .collect();
    Value::Array(messages)
}

#[derive(Default)]
struct IngestTally {
    latencies_ms: Vec<f64>,
    n_messages_stored: u64,
    n_posts: u64,
    n_resent: u64,
    n_resent_added: u64,
    n_bad_refused: u64,
    n_bad_accepted: u64,
    errors: BTreeMap<String, u64>,
}

async fn ingest(options: &Options) -> anyhow::Result<Value> {
    let urls = options.urls()?;
    let clients = options.number("clients", Some(32))?;
    let seconds = options.number("seconds", Some(30))?;
    let turns = options.number("turns", Some(4))? as usize;
    let users = options.number("users", Some(10_000))? as usize;
    let bad_every = options.number("bad-every", Some(0))?;
    let (http, token) = client()?;
    let tally: Arc<Mutex<IngestTally>> = Arc::default();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = tokio::task::JoinSet::new();
    for client_index in 0..clients {
        let (http, token, urls, tally) = (http.clone(), token.clone(), urls.clone(), Arc::clone(&tally));
        tasks.spawn(async move {
            let mut noise = Noise(0xe703_7ed1_a0b4_28db ^ (client_index + 1));
            let mut n_post = 0_u64;
            let mut last: Option<(String, Value)> = None;
            while Instant::now() < deadline {
                n_post += 1;
                let user = format!("i{:05}", zipf(&mut noise, users));
                let url = format!("{}/v1/users/{user}/messages", urls[noise.below(urls.len())]);
                let bad = bad_every > 0 && n_post.is_multiple_of(bad_every);
                let resend = !bad && n_post.is_multiple_of(50) && last.is_some();
                let (url, body) = if bad {
                    // A message without a role: the whole post must be refused, nothing stored.
                    let mut body = conversation(&mut noise, &format!("bad-{client_index}-{n_post}"), turns);
                    body[0].as_object_mut().expect("an object").remove("role");
                    (url, body)
                } else if resend {
                    last.clone().expect("checked")
                } else {
                    let body = conversation(&mut noise, &format!("load-{client_index}-{n_post}"), turns);
                    last = Some((url.clone(), body.clone()));
                    (url, body)
                };
                let started = Instant::now();
                let answer = http.post(&url).bearer_auth(&token).json(&body).send().await;
                let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
                let status = answer.as_ref().map(|response| response.status().as_u16()).ok();
                let report: Option<Value> = match answer {
                    Ok(response) if response.status().is_success() => response.json().await.ok(),
                    _ => None,
                };
                let mut tally = tally.lock().expect("not poisoned");
                tally.n_posts += 1;
                tally.latencies_ms.push(elapsed_ms);
                match (bad, status, report) {
                    (true, Some(400), _) => tally.n_bad_refused += 1,
                    (true, Some(200), _) => tally.n_bad_accepted += 1,
                    (false, Some(200), Some(report)) => {
                        let n_added = report["n_added"].as_u64().unwrap_or(0);
                        if resend {
                            tally.n_resent += 1;
                            tally.n_resent_added += n_added;
                        } else {
                            tally.n_messages_stored += n_added;
                        }
                    }
                    (_, Some(status), _) => *tally.errors.entry(status.to_string()).or_default() += 1,
                    (_, None, _) => *tally.errors.entry("transport".to_owned()).or_default() += 1,
                }
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done?;
    }
    let tally = std::mem::take(&mut *tally.lock().expect("not poisoned"));
    Ok(json!({
        "clients": clients,
        "daemons": urls.len(),
        "posts": tally.n_posts,
        "messages_stored": tally.n_messages_stored,
        "messages_per_sec": tally.n_messages_stored as f64 / seconds as f64,
        "latency": latency_figures(tally.latencies_ms),
        "resent": tally.n_resent,
        "resent_messages_added": tally.n_resent_added,
        "bad_refused": tally.n_bad_refused,
        "bad_accepted": tally.n_bad_accepted,
        "errors": tally.errors,
    }))
}

/// A GET answered 200 with JSON, or why not (a failed try is retried by the caller until its timeout).
async fn get_json(http: &reqwest::Client, token: &str, url: reqwest::Url) -> Result<Value, String> {
    let response = http
        .get(url)
        .bearer_auth(token)
        .send()
        .await
        .map_err(|error| format!("transport: {error}"))?;
    if !response.status().is_success() {
        return Err(response.status().as_u16().to_string());
    }
    response.json().await.map_err(|error| format!("body: {error}"))
}

async fn freshness(options: &Options) -> anyhow::Result<Value> {
    let write_url = options.text("write-url", None)?;
    let read_url = options.text("read-url", None)?;
    let samples = options.number("samples", Some(10))?;
    let timeout = Duration::from_secs(options.number("timeout-secs", Some(120))?);
    let (http, token) = client()?;
    let mut noise = Noise(0x8ebc_6af0_9c88_c6e3 ^ Utc::now().timestamp_micros() as u64);
    let mut lags_ms = Vec::new();
    let mut n_timed_out = 0;
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    for sample in 0..samples {
        let user = format!("fresh-{}-{sample}", word(&mut noise));
        let place = format!("{}{}", word(&mut noise), word(&mut noise));
        let body = json!([{
            "conversation": "c1", "id": "m1", "role": "user", "boundary": true,
            "content": format!("I moved to {place} last year."),
            "timestamp": (Utc::now() - chrono::Duration::minutes(5)).to_rfc3339(),
        }]);
        let posted = http
            .post(format!("{write_url}/v1/users/{user}/messages"))
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await?;
        if !posted.status().is_success() {
            bail!("{write_url}: ingest answered {}", posted.status());
        }
        let started = Instant::now();
        let listing = reqwest::Url::parse(&format!("{write_url}/v1/users/{user}/memories"))?;
        let search = reqwest::Url::parse_with_params(
            &format!("{read_url}/v1/users/{user}/memories/search"),
            &[("q", place.as_str())],
        )?;
        // Applied: the writing daemon's listing (a plain read of the database) shows it. Then
        // found: the other daemon's search answers with it.
        let mut applied: Option<Instant> = None;
        loop {
            let (url, pause) = match applied {
                None => (listing.clone(), Duration::from_millis(20)),
                Some(_) => (search.clone(), Duration::from_millis(5)),
            };
            match get_json(&http, &token, url).await {
                Ok(answer) if answer.to_string().contains(&place) => match applied {
                    None => applied = Some(Instant::now()),
                    Some(at) => {
                        lags_ms.push(at.elapsed().as_secs_f64() * 1000.0);
                        break;
                    }
                },
                Ok(_) => {}
                Err(error) => *errors.entry(error).or_default() += 1,
            }
            if started.elapsed() > timeout {
                n_timed_out += 1;
                break;
            }
            tokio::time::sleep(pause).await;
        }
    }
    Ok(json!({
        "samples": samples,
        "found_after_applied": latency_figures(lags_ms),
        "timed_out": n_timed_out,
        "errors": errors,
    }))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((command, rest)) = args.split_first() else {
        bail!("{USAGE}");
    };
    let options = Options::parse(rest)?;
    let figures = match command.as_str() {
        "seed" => seed(&options).await?,
        "search" => search(&options).await?,
        "ingest" => ingest(&options).await?,
        "freshness" => freshness(&options).await?,
        other => bail!("unknown command `{other}`; {USAGE}"),
    };
    println!("{}", serde_json::to_string(&figures)?);
    Ok(())
}
