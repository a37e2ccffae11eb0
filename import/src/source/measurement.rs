//! One measurement as the importer carries it: its fields in order, names
//! shared between rows (a bucket's thousand rows name their fields once), and
//! a bucket's meta value shared by all its rows rather than copied into each.

use std::sync::Arc;

use bson::{Bson, Document, RawDocument};
use rustc_hash::FxHashMap;

pub type Key = Arc<str>;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Measurement {
    /// A bucket's meta value, under the meta field's name.
    pub meta: Option<(Key, Arc<Bson>)>,
    pub fields: Vec<(Key, Bson)>,
}

impl Measurement {
    /// Every field, the shared meta value first.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Bson)> {
        self.meta.iter().map(|(k, v)| (&**k, &**v)).chain(self.fields.iter().map(|(k, v)| (&**k, v)))
    }

    pub fn get(&self, key: &str) -> Option<&Bson> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

}

impl From<Document> for Measurement {
    fn from(d: Document) -> Measurement {
        Measurement { meta: None, fields: d.into_iter().map(|(k, v)| (Key::from(k), v)).collect() }
    }
}

/// Field names seen so far, so that rows share them.
#[derive(Debug, Default)]
pub struct Keys(FxHashMap<Box<str>, Key>);

impl Keys {
    pub fn key(&mut self, k: &str) -> Key {
        if let Some(v) = self.0.get(k) {
            return v.clone();
        }
        let v: Key = Arc::from(k);
        // A runaway number of distinct names (keys that are data) is not kept.
        if self.0.len() < 100_000 {
            self.0.insert(k.into(), v.clone());
        }
        v
    }
}

/// A measurement straight from a document's bytes (no map built for it).
pub fn from_raw(raw: &RawDocument, keys: &mut Keys) -> Result<Measurement, String> {
    let mut fields = Vec::new();
    for e in raw.iter() {
        let (k, v) = e.map_err(|e| format!("not valid BSON: {e}"))?;
        let k = k.as_str();
        let v = Bson::try_from(v).map_err(|e| format!("not valid BSON in field \"{k}\": {e}"))?;
        fields.push((keys.key(k), v));
    }
    Ok(Measurement { meta: None, fields })
}
