//! In-server tests (`cargo pgrx test`): what needs a running Postgres but
//! only one session. Behaviour visible to users is covered by tests/pg_regress.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    fn setup() {
        Spi::run(
            "CREATE TABLE w (time timestamptz NOT NULL, sensor text NOT NULL, temp float8, note text) USING tsbucket;
             SELECT tsbucket.create_timeseries('w', 'time', 'sensor');",
        )
        .unwrap();
    }

    #[pg_test]
    fn rows_round_trip_through_buckets() {
        setup();
        Spi::run(
            "INSERT INTO w SELECT '2024-08-01'::timestamptz + i * interval '10 s', 's' || (i % 3), i / 10.0, NULL
               FROM generate_series(1, 5000) i",
        )
        .unwrap();
        assert_eq!(Spi::get_one::<i64>("SELECT count(*) FROM w").unwrap(), Some(5000));
        let sum: Option<f64> = Spi::get_one("SELECT sum(temp) FROM w").unwrap();
        assert!((sum.unwrap() - (1..=5000).map(|i| i as f64 / 10.0).sum::<f64>()).abs() < 1e-6);
        let problems: Option<i64> = Spi::get_one("SELECT count(*) FROM tsbucket.verify('w')").unwrap();
        assert_eq!(problems, Some(0));
    }

    #[pg_test]
    fn tids_name_bucket_and_row() {
        setup();
        Spi::run("INSERT INTO w VALUES ('2024-08-01 00:00:00+00', 'a', 1, NULL), ('2024-08-01 00:00:01+00', 'a', 2, NULL)").unwrap();
        let ctid: Option<String> = Spi::get_one("SELECT max(ctid::text) FROM w").unwrap();
        assert!(ctid.unwrap().ends_with(",2)"));
    }
}
