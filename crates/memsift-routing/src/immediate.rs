//! The immediate lane: one provider call per request, answered now at full price.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use memsift_core::config::{Config, ProviderKind};
use memsift_llm::anthropic::InputMessage;
use memsift_llm::{
    AnthropicClient, Call, ClientOptions, LlmError, OpenAiClient, PrefixReuse, PriceTable, ProviderFault, RateLimiter,
    ResolvedLlm, RetryPolicy, TokenUsage, build_batch_params, build_chat_request, cost, load_api_key, system_cache,
};
use secrecy::SecretString;

use crate::error::RoutingError;
use crate::strategy::{ExecutionOutcome, ExecutionRequest, ExecutionStrategy};

/// Calls the provider named by the request's resolved config. Clients are built on first use per
/// (provider, endpoint, model, config key) and reused, so connections and rate limits are shared.
pub struct ImmediateStrategy {
    keys: BTreeMap<String, SecretString>,
    prices: PriceTable,
    retry: RetryPolicy,
    limiter: RateLimiter,
    clients: Mutex<HashMap<ClientKey, ProviderClient>>,
}

impl std::fmt::Debug for ImmediateStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Keys are listed by config key only; `SecretString` would redact them anyway.
        f.debug_struct("ImmediateStrategy")
            .field("keys_for", &self.keys.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ClientKey {
    provider: &'static str,
    endpoint: Option<String>,
    model: String,
    config_key: String,
}

#[derive(Clone, Debug)]
enum ProviderClient {
    Anthropic(AnthropicClient),
    OpenAi(OpenAiClient),
}

impl ImmediateStrategy {
    /// A strategy with the API keys of every `[llm.*]` section, read now so a missing key stops
    /// start-up instead of failing the first call hours later.
    pub fn from_config(config: &Config, prices: PriceTable) -> Result<ImmediateStrategy, RoutingError> {
        let mut keys = BTreeMap::new();
        for (key, llm) in &config.llm {
            if llm.provider == ProviderKind::Heuristic {
                continue;
            }
            if let Some(secret) = load_api_key(key, llm).map_err(|error| RoutingError::Key(error.to_string()))? {
                keys.insert(key.clone(), secret);
            }
        }
        Ok(ImmediateStrategy::new(keys, prices))
    }

    /// A strategy with keys already loaded, by `{purpose}_{tier}` key (a key may be absent for
    /// local OpenAI-compatible servers that need none).
    pub fn new(keys: BTreeMap<String, SecretString>, prices: PriceTable) -> ImmediateStrategy {
        ImmediateStrategy {
            keys,
            prices,
            retry: RetryPolicy::default(),
            limiter: RateLimiter::default(),
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// The same strategy with another retry policy for its clients (tests use no retries or a
    /// virtual timekeeper).
    pub fn with_retry_policy(mut self, retry: RetryPolicy) -> ImmediateStrategy {
        self.retry = retry;
        self
    }

    /// The same strategy sharing the process-wide rate limiter.
    pub fn with_rate_limiter(mut self, limiter: RateLimiter) -> ImmediateStrategy {
        self.limiter = limiter;
        self
    }

    fn client(&self, llm: &ResolvedLlm) -> Result<ProviderClient, LlmError> {
        let key = ClientKey {
            provider: llm.provider.as_str(),
            endpoint: llm.endpoint.clone(),
            model: llm.model.clone(),
            config_key: llm.key.clone(),
        };
        if let Some(client) = self.clients().get(&key) {
            return Ok(client.clone());
        }
        let mut options = ClientOptions::new(llm.endpoint.clone(), self.keys.get(&llm.key).cloned(), &llm.model);
        options.retry = self.retry.clone();
        options.limiter = self.limiter.clone();
        let client = match llm.provider {
            ProviderKind::Anthropic => ProviderClient::Anthropic(AnthropicClient::new(options)?),
            ProviderKind::Openai | ProviderKind::OpenaiCompatible => {
                ProviderClient::OpenAi(OpenAiClient::new(options)?)
            }
            ProviderKind::Heuristic => {
                return Err(LlmError::Usage {
                    provider: "heuristic",
                    detail: format!(
                        "llm.{} uses the heuristic provider, which has no immediate lane; route it to HeuristicStrategy",
                        llm.key
                    ).into(),
                });
            }
        };
        // Two racing first calls may both build a client; the second insert wins and both work.
        self.clients().insert(key, client.clone());
        Ok(client)
    }

    fn clients(&self) -> MutexGuard<'_, HashMap<ClientKey, ProviderClient>> {
        self.clients
            .lock()
            .expect("client cache mutex is never poisoned: nothing panics while holding it")
    }

    fn completed(
        &self,
        llm: &ResolvedLlm,
        raw_output: String,
        stop_reason: Option<String>,
        usage: TokenUsage,
        model: String,
    ) -> ExecutionOutcome {
        let price = self.prices.price(&model).or_else(|| self.prices.price(&llm.model));
        let cost_usd = match price {
            Some(price) => cost(&usage, price, false),
            None => {
                tracing::warn!(model = %model, key = %llm.key, "model not in the price table; recording cost 0");
                0.0
            }
        };
        ExecutionOutcome::Completed {
            raw_output,
            stop_reason,
            usage,
            cost_usd,
            model,
        }
    }
}

/// Runs a provider call on the blocking pool, driven by the current runtime.
///
/// Why: the memsift-llm client futures hold a `&Bytes` across an await inside a generic retry
/// closure, and rustc cannot prove such futures `Send` (rust-lang/rust#64552), so they can be
/// neither awaited inside a `Send` strategy future nor `tokio::spawn`ed. A blocking-pool thread
/// polls them in place instead. The cost is one pooled thread per in-flight immediate call.
fn off_thread<T: Send + 'static>(
    call: impl FnOnce(&tokio::runtime::Handle) -> T + Send + 'static,
) -> tokio::task::JoinHandle<T> {
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || call(&runtime))
}

/// A call task that panicked or was cancelled.
fn join_error(provider: &'static str, error: &tokio::task::JoinError) -> LlmError {
    LlmError::Transient {
        provider,
        status: Some(0),
        detail: format!("the call task ended abnormally ({error}); retry the request").into(),
    }
}

/// A failed model call, classified once here for the lane that reads the outcome.
fn failed(error: LlmError, llm: &ResolvedLlm) -> ExecutionOutcome {
    ExecutionOutcome::failed(&ProviderFault::classify(error, Call::Generate, llm))
}

/// A call task that ended abnormally: not the provider's doing, so the attempt is simply retried.
fn aborted(error: LlmError) -> ExecutionOutcome {
    ExecutionOutcome::failed(&ProviderFault::retry(error))
}

#[async_trait]
impl ExecutionStrategy for ImmediateStrategy {
    async fn execute(&self, request: &ExecutionRequest<'_>) -> ExecutionOutcome {
        let llm = request.llm;
        let client = match self.client(llm) {
            Ok(client) => client,
            Err(error) => return failed(error, llm),
        };
        match client {
            ProviderClient::Anthropic(client) => {
                // One call at a time: no later call is known to reuse the prompt within the TTL.
                let reuse = PrefixReuse::single(self.prices.price(&llm.model));
                let params = build_batch_params(
                    request.purpose,
                    llm,
                    request.system_prompt,
                    vec![InputMessage::user(request.user_message)],
                    system_cache(llm, request.system_prompt, &reuse),
                );
                let call = off_thread(move |runtime| runtime.block_on(client.create_message(&params)));
                let answer = match call.await {
                    Ok(answer) => answer,
                    Err(error) => return aborted(join_error("anthropic", &error)),
                };
                match answer {
                    Ok(message) => {
                        let stop_reason = message
                            .stop_reason
                            .and_then(|reason| serde_json::to_value(reason).ok())
                            .and_then(|value| value.as_str().map(str::to_owned));
                        self.completed(
                            llm,
                            message.text(),
                            stop_reason,
                            message.token_usage(),
                            message.model.clone(),
                        )
                    }
                    Err(error) => failed(error, llm),
                }
            }
            ProviderClient::OpenAi(client) => {
                let chat = build_chat_request(
                    request.purpose,
                    llm,
                    request.system_prompt,
                    vec![request.user_message.to_owned()],
                );
                let call = off_thread(move |runtime| runtime.block_on(client.chat_completion(&chat)));
                let answer = match call.await {
                    Ok(answer) => answer,
                    Err(error) => return aborted(join_error("openai", &error)),
                };
                match answer {
                    Ok(completion) => {
                        // A refusal has no text: recorded as an empty answer the processor rejects,
                        // with the finish reason saying why.
                        let text = completion.text().unwrap_or_default().to_owned();
                        let stop_reason = completion
                            .choices
                            .first()
                            .and_then(|choice| choice.finish_reason.clone());
                        self.completed(
                            llm,
                            text,
                            stop_reason,
                            completion.token_usage(),
                            completion.model.clone(),
                        )
                    }
                    Err(error) => failed(error, llm),
                }
            }
        }
    }
}
