//! What the reader builds an array's elements as: generic values, or an item's named fields read straight into
//! the contract's slots, so that extraction never builds a value validation would not read.

use std::borrow::Cow;

use super::{MAX_DEPTH, Reader};
use crate::item::{Element, RawItem};
use crate::loose::LooseValue;

/// Something a reader can build an array's elements as: a generic value, or an item's named fields.
pub(crate) trait FromReader<'a>: Sized {
    /// Reads one element at the reader's position (a value start).
    fn read(reader: &mut Reader<'a>) -> Self;
    /// The element for a value already read (elements of a wrapper object).
    fn from_value(value: LooseValue<'a>) -> Self;
    /// Whether it is an object with a `text` key: what tells a response's array from a bracket in its prose.
    fn has_text(&self) -> bool;
}

impl<'a> FromReader<'a> for LooseValue<'a> {
    fn read(reader: &mut Reader<'a>) -> Self {
        reader.value()
    }

    fn from_value(value: LooseValue<'a>) -> Self {
        value
    }

    fn has_text(&self) -> bool {
        self.get("text").is_some()
    }
}

impl<'a> FromReader<'a> for Element<'a> {
    fn read(reader: &mut Reader<'a>) -> Self {
        if reader.peek() == Some(b'{') && reader.depth < MAX_DEPTH {
            Element::Item(reader.object::<RawItem<'a>>())
        } else {
            Element::Other(reader.value())
        }
    }

    fn from_value(value: LooseValue<'a>) -> Self {
        Element::from_loose(value)
    }

    fn has_text(&self) -> bool {
        matches!(self, Element::Item(item) if item.text.is_some())
    }
}

/// Somewhere an object's fields go: all of them in order, or only the contract's named slots.
pub(crate) trait Fields<'a>: Default {
    /// Adds a field; `partial` says the text ended inside the value (for a list, inside its last element), so
    /// it may be incomplete.
    fn insert(&mut self, key: Cow<'a, str>, value: LooseValue<'a>, partial: bool);
}

impl<'a> Fields<'a> for Vec<(Cow<'a, str>, LooseValue<'a>)> {
    fn insert(&mut self, key: Cow<'a, str>, value: LooseValue<'a>, _partial: bool) {
        self.push((key, value));
    }
}

/// The fields of a top-level object, with which lists ended in an incomplete element: the one that holds the
/// response's items (`{"memories": […]}`) may be followed by anything after a cut.
#[derive(Default)]
pub(crate) struct TopObject<'a> {
    pub fields: Vec<(Cow<'a, str>, LooseValue<'a>)>,
    /// Parallel to `fields`.
    pub lists_partial: Vec<bool>,
}

impl<'a> Fields<'a> for TopObject<'a> {
    fn insert(&mut self, key: Cow<'a, str>, value: LooseValue<'a>, partial: bool) {
        self.lists_partial
            .push(partial && matches!(value, LooseValue::Array(_)));
        self.fields.push((key, value));
    }
}

impl<'a> Fields<'a> for RawItem<'a> {
    /// A value the text ended inside is kept only as far as it closed: a list without its last element, the
    /// text as it stands (a truncated item's drop shows it; [`RawItem::text_whole`] says it is not whole), any
    /// other value not at all, so an item cut after its text closed is read from what it finished saying.
    fn insert(&mut self, key: Cow<'a, str>, value: LooseValue<'a>, partial: bool) {
        if key == "text" {
            self.text_whole = !partial;
        }
        let Some(slot) = self.slot(&key) else { return };
        *slot = match value {
            LooseValue::Array(mut values) if partial => {
                values.pop();
                Some(LooseValue::Array(values))
            }
            _ if partial && key != "text" => None,
            value => Some(value),
        };
    }
}
