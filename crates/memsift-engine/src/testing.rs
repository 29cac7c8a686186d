//! Test support (feature `testing`): an application on a real store with a hand-driven clock and,
//! when asked, an in-process provider simulator on the same clock.

use std::sync::Arc;

use crate::app::App;
use crate::wait::Waiter;
use chrono::{DateTime, Duration, Utc};
use memsift_core::config::Config;
use memsift_core::{Clock, ManualClock};
use memsift_sim::{FaultConfig, ScriptedResponder, Sim, SimConfig, SimHandle};
use memsift_store::testing::TestDb;

/// Waiting for due work in a test means moving the hand-driven clock there: no sleeps.
pub struct ClockWaiter(pub ManualClock);

#[async_trait::async_trait]
impl Waiter for ClockWaiter {
    async fn wait_until(&self, due: DateTime<Utc>) {
        if due > self.0.now() {
            self.0.set(due);
        }
    }
}

pub struct TestApp {
    pub app: App,
    pub clock: ManualClock,
    db: TestDb,
    sim: Option<SimHandle>,
    _key_dir: Option<tempfile::TempDir>,
}

pub fn app_on(store: &memsift_store::Store, clock: &ManualClock, config: Config, worker_id: &str) -> App {
    App::assemble(
        config,
        store.clone(),
        Arc::new(clock.clone()),
        Arc::new(ClockWaiter(clock.clone())),
        worker_id.to_owned(),
    )
    .expect("the test configuration is valid")
}

/// The default configuration with extraction on Anthropic's batch lane at `base_url`.
pub fn batch_config(base_url: &str, key_file: &std::path::Path) -> Config {
    provider_batch_config("anthropic", base_url, "claude-haiku-4-5", key_file)
}

/// The default configuration with extraction on one provider's batch lane.
pub fn provider_batch_config(provider: &str, base_url: &str, model: &str, key_file: &std::path::Path) -> Config {
    std::fs::write(key_file, "test-key").unwrap();
    let overlay = format!(
        "{HASHING}[batch]\npack_max_wait_secs = 0\npoll_initial_secs = 30\nreconcile_grace_secs = 300\n\n\
         [llm.extraction_standard]\nprovider = \"{provider}\"\nendpoint = \"{base_url}\"\nmodel = \"{model}\"\n\
         api_key_file = \"{}\"\nlane = \"batch\"\nmax_tokens = 4096\n",
        key_file.display()
    );
    Config::from_layers(Some(("test overlay", &overlay))).unwrap()
}

/// Tests embed with the hashing double: fast and deterministic, and enough to exercise the vector
/// stage and the similar-memory context. The MiniLM path has its own tests.
pub const HASHING: &str = "[embeddings]\nbackend = \"hashing\"\n\n";

/// The default configuration with the hashing embedder.
pub fn test_config() -> Config {
    Config::from_layers(Some(("test overlay", HASHING))).unwrap()
}

/// `app` with its search indexes held under a budget of `bytes` (the configured one is counted in
/// megabytes; a test of the budget needs users of a few kilobytes to pass it).
pub fn with_held_budget(app: &App, bytes: usize) -> App {
    let held = Arc::new(crate::held::IndexHolder::new(bytes));
    let mut app = app.clone();
    app.vectors = Arc::new(crate::embedding::Vectors::new(
        &app.config.embeddings,
        Arc::clone(&app.clock),
        Arc::clone(&held),
    ));
    app.held = held;
    app
}

/// `app` with its immediate-lane clients retrying on a virtual clock: a test of failing calls
/// counts their retries without waiting seconds for each.
pub fn with_virtual_retries(app: &App) -> App {
    let retry = memsift_llm::RetryPolicy {
        timekeeper: memsift_llm::VirtualTimekeeper::new(),
        ..memsift_llm::RetryPolicy::default()
    };
    let prices = memsift_llm::PriceTable {
        models: app.config.prices.clone(),
    };
    let mut app = app.clone();
    app.immediate = Arc::new(
        memsift_routing::ImmediateStrategy::from_config(&app.config, prices)
            .expect("the test configuration is valid")
            .with_retry_policy(retry)
            .with_rate_limiter(app.limiter.clone()),
    );
    app
}

/// `app` with its batch lane's reads (a poll's 404 right after create is retried, in seconds of
/// real time) retrying on a virtual clock: a test of lost batches steps through hours of polls.
pub fn with_virtual_batch_retries(app: &App) -> App {
    let retry = memsift_llm::RetryPolicy {
        timekeeper: memsift_llm::VirtualTimekeeper::new(),
        ..memsift_llm::RetryPolicy::default()
    };
    let mut app = app.clone();
    app.coordinator = crate::app::build_coordinator(
        &app.config,
        &app.store,
        &app.clock,
        &app.worker_id,
        &app.limiter,
        &app.health,
        retry,
    )
    .expect("the test configuration is valid");
    app
}

pub fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-03-01T10:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

impl TestApp {
    pub async fn sqlite() -> TestApp {
        TestApp::on(TestDb::sqlite().await).await
    }

    pub async fn postgres() -> TestApp {
        TestApp::on(TestDb::postgres().await).await
    }

    async fn on(db: TestDb) -> TestApp {
        let clock = ManualClock::new(t0());
        let app = app_on(&db.store, &clock, test_config(), "test-worker");
        TestApp {
            app,
            clock,
            db,
            sim: None,
            _key_dir: None,
        }
    }

    /// An app whose extraction goes through the batch lane of an in-process simulator that shares
    /// the test's clock (so batch processing time passes only when the test says so).
    pub async fn with_batch_sim(db: TestDb, faults: FaultConfig) -> TestApp {
        let sim_config = SimConfig::from_cli("heuristic", None).unwrap().with_faults(faults);
        TestApp::on_sim(db, sim_config, |sim, key_file| batch_config(&sim.base_url, key_file)).await
    }

    /// Like [`TestApp::with_batch_sim`], answering from a script instead of the heuristic rules.
    pub async fn with_scripted_batch_sim(db: TestDb, script: ScriptedResponder) -> TestApp {
        let sim_config = SimConfig::new(Arc::new(script));
        TestApp::on_sim(db, sim_config, |sim, key_file| batch_config(&sim.base_url, key_file)).await
    }

    /// Like [`TestApp::with_batch_sim`], on OpenAI's Files + Batches API.
    pub async fn with_openai_batch_sim(db: TestDb) -> TestApp {
        let sim_config = SimConfig::from_cli("heuristic", None).unwrap();
        TestApp::on_sim(db, sim_config, |sim, key_file| {
            provider_batch_config("openai", &sim.openai_base_url(), "gpt-4o-mini", key_file)
        })
        .await
    }

    /// Starts `sim_config` on the test's clock with the test key, and builds the app from the
    /// configuration `config_for` makes for that simulator and a key file.
    pub async fn on_sim(
        db: TestDb,
        sim_config: SimConfig,
        config_for: impl FnOnce(&SimHandle, &std::path::Path) -> Config,
    ) -> TestApp {
        let clock = ManualClock::new(t0());
        let sim_config = sim_config.with_api_key("test-key").with_clock(Arc::new(clock.clone()));
        let sim = Sim::start(sim_config).await.unwrap();
        let key_dir = tempfile::tempdir().unwrap();
        let config = config_for(&sim, &key_dir.path().join("key"));
        let app = app_on(&db.store, &clock, config, "daemon-a");
        TestApp {
            app,
            clock,
            db,
            sim: Some(sim),
            _key_dir: Some(key_dir),
        }
    }

    /// A second daemon on the same database and simulator.
    pub fn second_daemon(&self, worker_id: &str) -> App {
        app_on(&self.app.store, &self.clock, self.app.config.clone(), worker_id)
    }

    /// The texts of a user's active memories, in listing order.
    pub async fn memory_texts(&self, user: &str) -> Vec<String> {
        self.app
            .store
            .listing()
            .list_memories(user, None)
            .await
            .unwrap()
            .into_iter()
            .map(|memory| memory.text)
            .collect()
    }

    pub fn sim(&self) -> &SimHandle {
        self.sim.as_ref().expect("started with a simulator")
    }

    /// The test clock's time.
    pub fn clock_now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    pub fn advance(&self, by: Duration) {
        self.clock.advance(by);
    }

    pub async fn import(&self, name: &str, jsonl: &str) -> anyhow::Result<memsift_store::IngestReport> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join(name);
        std::fs::write(&path, jsonl)?;
        crate::ingest::import_file(&self.app, &path, memsift_import::ImportFormat::Jsonl, &|_, _| {}).await
    }

    pub async fn finish(self) {
        // An open results download holds a connection the simulator's shutdown would wait for.
        if let Some(coordinator) = &self.app.coordinator {
            coordinator.close_downloads();
        }
        if let Some(sim) = self.sim {
            sim.shutdown().await.unwrap();
        }
        self.db.finish().await;
    }
}

/// A JSONL line.
pub fn line(user: &str, conversation: &str, minute: i64, role: &str, content: &str, boundary: bool) -> String {
    serde_json::json!({
        "user": user,
        "conversation": conversation,
        "role": role,
        "content": content,
        "timestamp": (t0() + Duration::minutes(minute)).to_rfc3339(),
        "boundary": boundary,
    })
    .to_string()
        + "\n"
}

/// The MiniLM directory every test shares, installed once per machine by the same pinned,
/// verified install as `memsift model install` and `.ci/run`, so a process test on a fresh HOME
/// (which never installs the model itself) does not download 90 MB.
pub fn installed_model_dir() -> std::path::PathBuf {
    let dir = memsift_embed::model::default_model_dir();
    memsift_embed::model::install(&dir)
        .unwrap_or_else(|error| panic!("the MiniLM model is needed at {}: {error}", dir.display()))
        .dir
}

/// xorshift64 for the benches: reproducible data without a dependency.
pub struct Noise(pub u64);

impl Noise {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// A value in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// A made-up word of three consonant-vowel syllables ("bapiru"): names and places the benches'
/// generated conversations say, unlike any real word and one another.
pub fn word(noise: &mut Noise) -> String {
    let onsets = ["b", "d", "f", "g", "l", "m", "n", "p", "r", "s", "t", "v"];
    let vowels = ["a", "e", "i", "o", "u"];
    (0..3)
        .map(|_| {
            format!(
                "{}{}",
                onsets[noise.below(onsets.len())],
                vowels[noise.below(vowels.len())]
            )
        })
        .collect()
}

/// This process's resident memory in MB (`VmRSS`), 0 where `/proc` does not say.
pub fn resident_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmRSS:"))
                .and_then(|line| line.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}
