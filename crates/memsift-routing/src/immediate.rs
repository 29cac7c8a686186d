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

/// Runs a provider call on the blocking pool, driven by the current runtime, for as long as the
/// returned future is awaited: dropping it stops the call.
///
/// Why a thread: the memsift-llm client futures hold a `&Bytes` across an await inside a generic
/// retry closure, and rustc cannot prove such futures `Send` (rust-lang/rust#64552), so they can
/// be neither awaited inside a `Send` strategy future nor `tokio::spawn`ed. A blocking-pool thread
/// polls them in place instead. The cost is one pooled thread per in-flight immediate call.
///
/// Why it stops: a call left running after its caller is gone (a step dropped at the end of the
/// daemon's drain) would outlive the runtime's drivers and panic inside tokio during shutdown.
fn off_thread<T, F>(call: impl FnOnce() -> F + Send + 'static) -> OffThread<T>
where
    T: Send + 'static,
    F: std::future::Future<Output = T>,
{
    let runtime = tokio::runtime::Handle::current();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::task::spawn_blocking(move || {
        runtime.block_on(async move {
            tokio::select! {
                output = call() => Some(output),
                // Nothing is ever sent: the sender is dropped with the caller's future.
                _ = stopped => None,
            }
        })
    });
    OffThread { task, _stop: stop }
}

/// A call running on its own thread; dropping it stops the call (see [`off_thread`]).
struct OffThread<T> {
    task: tokio::task::JoinHandle<Option<T>>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl<T> std::future::Future for OffThread<T> {
    /// The call's output, or why the call task ended without one.
    type Output = Result<T, String>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.task).poll(cx).map(|joined| match joined {
            Ok(Some(output)) => Ok(output),
            // Only a dropped sender stops the call, and this future holds it while it is polled.
            Ok(None) => Err("the call was stopped".to_owned()),
            Err(error) => Err(error.to_string()),
        })
    }
}

/// A call task that panicked or was cancelled.
fn join_error(provider: &'static str, error: &str) -> LlmError {
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
                let call = off_thread(move || async move { client.create_message(&params).await });
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
                let call = off_thread(move || async move { client.chat_completion(&chat).await });
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

#[cfg(test)]
mod tests {
    use super::off_thread;

    /// Sends on drop: tells the test the call's future was dropped, wherever that happened.
    struct Dropped(Option<tokio::sync::oneshot::Sender<()>>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            if let Some(sender) = self.0.take() {
                let _ = sender.send(());
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_whose_caller_is_gone_stops_instead_of_outliving_it() {
        let (started, call_started) = tokio::sync::oneshot::channel::<()>();
        let (dropped, call_dropped) = tokio::sync::oneshot::channel::<()>();
        let call = off_thread(move || async move {
            let _dropped = Dropped(Some(dropped));
            let _ = started.send(());
            // A provider that never answers.
            std::future::pending::<()>().await;
        });
        call_started.await.expect("the call started on its thread");
        drop(call);
        // The bound only fails the test instead of hanging it; the drop is what ends the call.
        tokio::time::timeout(std::time::Duration::from_secs(30), call_dropped)
            .await
            .expect("the call stopped once its caller was gone")
            .expect("the call's future was dropped, not leaked");
    }
}
