//! A time-series collection's options, as `<coll>.metadata.json` (or an
//! archive's prelude) holds them, or as given on the command line.

use bson::{Bson, Document};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct TimeseriesOptions {
    pub time_field: String,
    pub meta_field: Option<String>,
    pub granularity: Option<String>,
    pub bucket_max_span_seconds: Option<i64>,
    pub bucket_rounding_seconds: Option<i64>,
    pub expire_after_seconds: Option<i64>,
}

fn int(v: Option<&Bson>) -> Option<i64> {
    match v? {
        Bson::Int32(i) => Some(*i as i64),
        Bson::Int64(i) => Some(*i),
        Bson::Double(d) if d.fract() == 0.0 => Some(*d as i64),
        _ => None,
    }
}

impl TimeseriesOptions {
    /// From a collection's options document (`options` of metadata.json):
    /// None when the collection is not a time-series collection.
    pub fn from_collection_options(options: &Document) -> Option<TimeseriesOptions> {
        let ts = match options.get("timeseries") {
            Some(Bson::Document(d)) => d,
            _ => return None,
        };
        let time_field = match ts.get("timeField") {
            Some(Bson::String(s)) => s.clone(),
            _ => return None,
        };
        let text = |k: &str| match ts.get(k) {
            Some(Bson::String(s)) => Some(s.clone()),
            _ => None,
        };
        Some(TimeseriesOptions {
            time_field,
            meta_field: text("metaField"),
            granularity: text("granularity"),
            bucket_max_span_seconds: int(ts.get("bucketMaxSpanSeconds")),
            bucket_rounding_seconds: int(ts.get("bucketRoundingSeconds")),
            // TTL sits beside `timeseries` in the collection's options.
            expire_after_seconds: int(options.get("expireAfterSeconds")),
        })
    }

    /// The window to give `create_timeseries`: a granularity, or a custom span
    /// in seconds (MongoDB's rounding equals the span for custom buckets; when
    /// it does not, the span is the one that bounds a bucket).
    pub fn window(&self) -> Window {
        match (self.bucket_max_span_seconds, self.bucket_rounding_seconds, self.granularity.as_deref()) {
            (Some(span), Some(round), _) if span == round => Window::Span(span),
            (_, _, Some(g)) => Window::Granularity(g.to_string()),
            (Some(span), _, None) => match span {
                3600 => Window::Granularity("seconds".into()),
                86400 => Window::Granularity("minutes".into()),
                2_592_000 => Window::Granularity("hours".into()),
                s => Window::Span(s),
            },
            (None, _, None) => Window::Granularity("seconds".into()),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Window {
    Granularity(String),
    Span(i64),
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn options_come_from_metadata_and_map_to_a_window() {
        let o = doc! { "timeseries": { "timeField": "ts", "metaField": "m", "granularity": "hours", "bucketMaxSpanSeconds": 2592000 }, "expireAfterSeconds": 86400i64 };
        let t = TimeseriesOptions::from_collection_options(&o).unwrap();
        assert_eq!(t.time_field, "ts");
        assert_eq!(t.meta_field.as_deref(), Some("m"));
        assert_eq!(t.expire_after_seconds, Some(86400));
        assert_eq!(t.window(), Window::Granularity("hours".into()));
        let o = doc! { "timeseries": { "timeField": "ts", "bucketMaxSpanSeconds": 600, "bucketRoundingSeconds": 600 } };
        assert_eq!(TimeseriesOptions::from_collection_options(&o).unwrap().window(), Window::Span(600));
        assert!(TimeseriesOptions::from_collection_options(&doc! { "capped": true }).is_none());
    }
}
