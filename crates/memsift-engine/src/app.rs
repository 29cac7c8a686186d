//! The application: configuration, store, clock, prompts, router, lanes and the batch coordinator,
//! built once and shared by every command.

use std::sync::Arc;

use anyhow::Context;
use memsift_batch::{AnthropicBatchProvider, BatchCoordinator, BatchSettings, OpenAiBatchProvider};
use memsift_core::config::{Config, LanePolicy, ProviderKind};
use memsift_core::prompt::PromptRegistry;
use memsift_core::{Clock, SystemClock};
use memsift_llm::{
    AnthropicClient, ClientOptions, HealthBoard, KeyQuota, LimitKey, OpenAiClient, PriceTable, RateLimiter, ResolvedLlm,
};
use memsift_routing::{BillingBackend, ColumnBilling, HeuristicStrategy, ImmediateStrategy, Router};
use memsift_store::{Store, StoreOptions, redact};

use crate::context::ApplyContext;
use crate::embedding::Vectors;
use crate::held::IndexHolder;
use crate::setup::{connectable_url, load_erasure_key};
use crate::wait::{SleepWaiter, Waiter};

/// The config key recorded on requests that the budget policy sent to the heuristic lane.
pub const OVER_BUDGET_KEY: &str = "over_budget_heuristic";

/// Everything a command needs.
#[derive(Clone)]
pub struct App {
    /// Validated configuration.
    pub config: Config,
    /// The store, migrated.
    pub store: Store,
    /// The clock every time-dependent decision reads.
    pub clock: Arc<dyn Clock>,
    /// Prompts, with their versions.
    pub prompts: PromptRegistry,
    /// This process's name in claims (`host:pid`).
    pub worker_id: String,
    /// Tier → `{purpose}_{tier}` → lane, per call.
    pub router: Arc<Router>,
    /// Where a user's tier comes from.
    pub billing: Arc<dyn BillingBackend>,
    /// The offline lane.
    pub heuristic: Arc<HeuristicStrategy>,
    /// One provider call per request.
    pub immediate: Arc<ImmediateStrategy>,
    /// The batch lane, when any config key can reach it.
    pub coordinator: Option<Arc<BatchCoordinator>>,
    /// How `run --until-idle` waits for work due later.
    pub waiter: Arc<dyn Waiter>,
    /// The embedder (loaded on first use).
    pub vectors: Arc<Vectors>,
    /// Every user's search indexes held in memory (vectors and lexicons), under `[search] held_mb`.
    pub held: Arc<IndexHolder>,
    /// Every provider lane's breaker, fed by every lane and the coordinator, read by routing.
    pub health: Arc<HealthBoard>,
    /// One rate limiter per provider and model, shared by every lane and route of the process.
    pub limiter: RateLimiter,
    /// This process's segment claims, for `/metrics`.
    pub claims: Arc<crate::claims::ClaimStats>,
    /// Set once this process is recorded as a worker (before its first claim; a read-only
    /// command never writes it).
    registered: Arc<tokio::sync::OnceCell<()>>,
}

impl App {
    /// Opens the store at `url`, migrates it and assembles the application.
    pub async fn open(
        config: Config,
        url: &str,
        clock: Arc<dyn Clock>,
        waiter: Arc<dyn Waiter>,
    ) -> anyhow::Result<App> {
        let options = StoreOptions {
            max_connections: config.database.max_connections,
            sqlite_synchronous_full: config.database.sqlite_synchronous == "full",
            ..StoreOptions::default()
        };
        let url = connectable_url(url)?;
        let store = Store::connect(&url, &options)
            .await
            .with_context(|| format!("cannot open database {}", redact(&url)))?;
        match store.plain_text_warning() {
            Some(warning) => tracing::warn!("{warning}"),
            None => tracing::info!(transport = %store.transport(), "database session opened"),
        }
        store.migrate().await.context("cannot migrate the database")?;
        let store = store.with_erasure_key(load_erasure_key(&config)?);
        store
            .erasure()
            .adopt_erasure_key(clock.now())
            .await
            .context("cannot use the erasure key")?;
        let worker_id = format!("{}:{}", crate::process::host_name(), std::process::id());
        App::assemble(config, store, clock, waiter, worker_id)
    }

    /// Records this process as the worker its claims name (host, PID, boot id), once, before the
    /// first claim: a later run tells a gone process's claims from a running one's by it.
    pub async fn register_worker(&self) -> anyhow::Result<()> {
        self.registered
            .get_or_try_init(|| async {
                let identity = crate::process::this_process(&self.worker_id);
                self.store.workers().register_worker(&identity, self.clock.now()).await
            })
            .await
            .context("cannot record this process as a worker")?;
        Ok(())
    }

    /// Opens with the wall clock.
    pub async fn open_with_system_clock(config: Config, url: &str) -> anyhow::Result<App> {
        App::open(config, url, Arc::new(SystemClock), Arc::new(SleepWaiter)).await
    }

    /// Builds the application around an open, migrated store (tests call this directly).
    pub fn assemble(
        config: Config,
        store: Store,
        clock: Arc<dyn Clock>,
        waiter: Arc<dyn Waiter>,
        worker_id: String,
    ) -> anyhow::Result<App> {
        let prompts = match &config.prompts.dir {
            Some(dir) => PromptRegistry::with_overrides(dir)?,
            None => PromptRegistry::built_in(),
        };
        crate::setup::check_chunk_budget(&config, &prompts, clock.now())?;
        let billing: Arc<dyn BillingBackend> = Arc::new(ColumnBilling {
            default_tier: config.billing.default_tier.clone(),
        });
        let router = Arc::new(Router::new(&config, Arc::clone(&billing))?);
        let prices = PriceTable {
            models: config.prices.clone(),
        };
        let held = Arc::new(IndexHolder::with_megabytes(config.search.held_mb));
        let vectors = Arc::new(Vectors::new(&config.embeddings, Arc::clone(&clock), Arc::clone(&held)));
        let health = router.health();
        let limiter = shared_limiter(&config);
        let coordinator = build_coordinator(
            &config,
            &store,
            &clock,
            &worker_id,
            &limiter,
            &health,
            memsift_llm::RetryPolicy::default(),
        )?;
        Ok(App {
            immediate: Arc::new(
                ImmediateStrategy::from_config(&config, prices.clone())?.with_rate_limiter(limiter.clone()),
            ),
            heuristic: Arc::new(HeuristicStrategy),
            config,
            store,
            clock,
            prompts,
            worker_id,
            router,
            billing,
            coordinator,
            waiter,
            vectors,
            held,
            health,
            limiter,
            claims: Arc::default(),
            registered: Arc::default(),
        })
    }

    /// What the apply path needs, borrowed from the application.
    pub fn apply_context(&self) -> ApplyContext {
        ApplyContext {
            store: self.store.clone(),
            clock: Arc::clone(&self.clock),
            vectors: Arc::clone(&self.vectors),
            continuations: Some(Arc::new(self.clone())),
        }
    }

    /// The resolved `{purpose}_{tier}` config (validated at start-up by the router), or the offline
    /// lane for work the budget policy sent there.
    pub fn resolved_llm(&self, config_key: &str) -> anyhow::Result<ResolvedLlm> {
        if config_key == OVER_BUDGET_KEY {
            return Ok(ResolvedLlm::offline(config_key));
        }
        let llm = self
            .config
            .llm
            .get(config_key)
            .with_context(|| format!("no [llm.{config_key}] section"))?;
        ResolvedLlm::resolve(config_key, llm).map_err(|errors| {
            anyhow::anyhow!(
                "{}",
                errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
            )
        })
    }
}

/// The process's one limiter, with every `[quotas]` entry set (for this process alone until the
/// pipeline learns how many processes share the database).
fn shared_limiter(config: &Config) -> RateLimiter {
    let limiter = RateLimiter::default();
    for (name, quota) in &config.quotas {
        // Validated at load: "PROVIDER/MODEL".
        let (provider, model) = name.split_once('/').unwrap_or((name.as_str(), ""));
        // One client speaks both OpenAI and compatible servers, and names its budget `openai`.
        let provider = if provider == "openai_compatible" {
            "openai"
        } else {
            provider
        };
        limiter.set_quotas(
            &LimitKey::new(provider, model),
            KeyQuota {
                requests_per_minute: quota.requests_per_minute.and_then(std::num::NonZeroU32::new),
                tokens_per_minute: quota.tokens_per_minute.and_then(std::num::NonZeroU32::new),
            },
        );
    }
    limiter
}

/// The bounds on every read from a provider, from `[batch]`.
pub fn read_limits(config: &Config) -> memsift_llm::ReadLimits {
    memsift_llm::ReadLimits {
        max_line_bytes: usize::try_from(config.batch.max_result_line_bytes).unwrap_or(usize::MAX),
        idle_timeout: std::time::Duration::from_secs(config.batch.download_idle_secs),
        ..memsift_llm::ReadLimits::default()
    }
}

/// One batch provider per config key whose provider has a batch API and whose lane can be batch;
/// their reads retry under `retry` (tests wait on a virtual clock).
pub fn build_coordinator(
    config: &Config,
    store: &Store,
    clock: &Arc<dyn Clock>,
    worker_id: &str,
    limiter: &RateLimiter,
    health: &Arc<HealthBoard>,
    retry: memsift_llm::RetryPolicy,
) -> anyhow::Result<Option<Arc<BatchCoordinator>>> {
    let prices = &PriceTable {
        models: config.prices.clone(),
    };
    let settings = BatchSettings {
        max_requests_per_batch: config.batch.max_requests_per_batch as i64,
        pack_max_wait: config.pack_max_wait(),
        poll_initial: config.poll_initial(),
        poll_max: config.poll_max(),
        reconcile_grace: config.reconcile_grace(),
        // Never longer than the grace an operator shortened.
        reconcile_recheck: config.reconcile_grace().min(BatchSettings::default().reconcile_recheck),
        claim_lease: config.claim_lease(),
        delete_erased_batches: config.erasure.delete_provider_batches,
        max_batch_losses: i64::from(config.batch.max_batch_losses),
    };
    let mut coordinator = BatchCoordinator::new(store.clone(), Arc::clone(clock), worker_id.to_owned(), settings)
        .with_health(Arc::clone(health));
    for (key, llm_config) in &config.llm {
        let has_batch_api = matches!(llm_config.provider, ProviderKind::Anthropic | ProviderKind::Openai);
        if !has_batch_api || llm_config.lane == LanePolicy::Immediate {
            continue;
        }
        let llm = ResolvedLlm::resolve(key, llm_config).map_err(|errors| {
            anyhow::anyhow!(
                "{}",
                errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
            )
        })?;
        let api_key = memsift_llm::load_api_key(key, llm_config)?;
        let mut options = ClientOptions::new(llm_config.endpoint.clone(), api_key, llm.model.clone());
        options.limiter = limiter.clone();
        options.read_limits = read_limits(config);
        options.retry = retry.clone();
        match llm_config.provider {
            ProviderKind::Anthropic => {
                let client = AnthropicClient::new(options)?;
                coordinator.add_provider(key, Arc::new(AnthropicBatchProvider::new(client, llm, prices.clone())));
            }
            _ => {
                let client = OpenAiClient::new(options)?;
                coordinator.add_provider(key, Arc::new(OpenAiBatchProvider::new(client, llm, prices.clone())));
            }
        }
    }
    if !coordinator.has_providers() {
        return Ok(None);
    }
    Ok(Some(Arc::new(coordinator)))
}

/// A fail point scoped to one worker, named `{name}::{worker_id}`: a test arms it for its own
/// app's worker id, so it cannot trip the tests running beside it in the same process. It is
/// compiled to nothing unless the `fail` crate's `failpoints` feature is on, which only test
/// builds turn on (through the dev-dependency on memsift-batch's `failpoints` feature).
pub fn worker_fail_point(name: &str, worker_id: &str) {
    fail::fail_point!(&format!("{name}::{worker_id}"));
    // Read by the fail point alone, which is compiled out of production builds.
    let _ = (name, worker_id);
}
