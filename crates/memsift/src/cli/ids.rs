//! Ids as people type them: the whole id, or at least 4 characters from its start or its end, and
//! one clear line when an input names none or several.

use memsift_engine::app::App;
use memsift_store::IdKind;

/// The fewest characters of an id a command accepts: fewer would match too much to be useful.
const MIN_ID_FRAGMENT: usize = 4;

/// The full id of `kind` that `input` names: the whole id, or 4 or more characters from its start
/// or its end (the tables print the last 12). Several or no matches are an error naming `input`
/// (and the matches), never a guess. With `user`, only that user's rows are searched, so an id of
/// another user's is answered as absent.
pub(super) async fn resolve_id(app: &App, kind: IdKind, input: &str, user: Option<&str>) -> anyhow::Result<String> {
    let mut matches = matching_ids(app, &[kind], input, user).await?;
    match matches.len() {
        1 => Ok(matches.remove(0).1),
        _ => Err(unresolved(&[kind], input, user, &matches)),
    }
}

/// The ids of any of `kinds` that `input` names, each with its kind; checks the input's length.
pub(super) async fn matching_ids(
    app: &App,
    kinds: &[IdKind],
    input: &str,
    user: Option<&str>,
) -> anyhow::Result<Vec<(IdKind, String)>> {
    let input = input.trim();
    let names = kind_names(kinds);
    if input.chars().count() < MIN_ID_FRAGMENT {
        anyhow::bail!(
            "`{input}` is too short to name a {names}; give at least {MIN_ID_FRAGMENT} characters of its id (the tables print the last 12)"
        );
    }
    let mut matches = Vec::new();
    for kind in kinds {
        for id in app.store.listing().ids_matching(*kind, input, user).await? {
            matches.push((*kind, id));
        }
    }
    Ok(matches)
}

/// "request", "request or batch", "request, batch or memory": the kinds an id may name.
fn kind_names(kinds: &[IdKind]) -> String {
    match kinds.split_last() {
        None => String::new(),
        Some((last, [])) => last.as_str().to_owned(),
        Some((last, rest)) => {
            let rest = rest.iter().map(|kind| kind.as_str()).collect::<Vec<_>>().join(", ");
            format!("{rest} or {}", last.as_str())
        }
    }
}

/// The one-line error for an input that names no id, or several.
pub(super) fn unresolved(
    kinds: &[IdKind],
    input: &str,
    user: Option<&str>,
    matches: &[(IdKind, String)],
) -> anyhow::Error {
    let input = input.trim();
    let names = kind_names(kinds);
    let listings = kinds
        .iter()
        .map(|kind| match kind {
            IdKind::Segment => "`memsift segments`",
            IdKind::Memory => "`memsift memories --user USER`",
            IdKind::Request => "`memsift requests`",
            IdKind::Batch => "`memsift batches`",
            IdKind::Operation => "the revision or stage change that printed it",
        })
        .collect::<Vec<_>>()
        .join(" or ");
    let whose = user.map(|user| format!(" of user `{user}`")).unwrap_or_default();
    if matches.is_empty() {
        return anyhow::anyhow!("no {names} id{whose} begins or ends with `{input}`; {listings} lists them");
    }
    let listed = matches
        .iter()
        .map(|(kind, id)| {
            if kinds.len() > 1 {
                format!("{} {id}", kind.as_str())
            } else {
                id.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    anyhow::anyhow!("`{input}` names more than one {names}{whose}: {listed}; give more characters of the one you mean")
}
