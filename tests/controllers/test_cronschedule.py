"""CronJob run times: robfig's next time in a zone, and upstream's most recent missed run."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers.cronschedule import CronSchedule, most_recent, next_run_delay

T0 = 1_700_000_000  # 2023-11-14T22:13:20Z, a Tuesday


class CronScheduleTests(SynchronousTestCase):
    def test_next_minute_step(self):
        """*/5 runs at the next multiple of five minutes."""
        self.assertEqual(CronSchedule("*/5 * * * *").next(T0), T0 - 200 + 300)

    def test_macros(self):
        """@hourly, @daily, @weekly, @monthly and @yearly run at their upstream times."""
        cases = {"@hourly": "2023-11-14T23:00:00Z", "@daily": "2023-11-15T00:00:00Z",
                 "@weekly": "2023-11-19T00:00:00Z", "@monthly": "2023-12-01T00:00:00Z",
                 "@yearly": "2024-01-01T00:00:00Z"}
        for text, expected in cases.items():
            schedule = CronSchedule(text)
            self.assertEqual(schedule.format(schedule.next(T0)), expected, text)

    def test_time_zone(self):
        """A schedule in America/New_York runs at 9:00 local, 14:00 UTC in winter."""
        schedule = CronSchedule("0 9 * * 1-5", "America/New_York")
        when = schedule.next(T0)
        self.assertEqual(when, 1_700_056_800)
        self.assertEqual(schedule.format(when), "2023-11-15T09:00:00-05:00")

    def test_unknown_zone(self):
        """An unknown time zone is refused."""
        self.assertRaises(ValueError, CronSchedule, "* * * * *", "Mars/Olympus")
        self.assertRaises(ValueError, CronSchedule, "* * * * *", "../etc/passwd")

    def test_day_of_month_or_week(self):
        """With both day fields restricted, either matching is enough (robfig)."""
        schedule = CronSchedule("0 0 13 * 5")  # the 13th, or a Friday
        self.assertEqual(schedule.format(schedule.next(T0)), "2023-11-17T00:00:00Z")

    def test_never(self):
        """31 February never comes: no next time."""
        self.assertIsNone(CronSchedule("0 0 31 2 *").next(T0))

    def test_every(self):
        """@every 90m runs 90 minutes later."""
        self.assertEqual(CronSchedule("@every 90m").next(T0), T0 + 5400)

    def test_most_recent(self):
        """The latest run time due and the count missed; none before the first."""
        schedule = CronSchedule("* * * * *")
        self.assertEqual(most_recent(schedule, T0, T0 + 30), (None, 0))
        self.assertEqual(most_recent(schedule, T0, T0 + 45), (T0 + 40, 1))
        self.assertEqual(most_recent(schedule, T0, T0 + 600.5), (T0 + 580, 10))

    def test_most_recent_uneven(self):
        """For runs unevenly apart (6-16/4 on weekdays) the latest due one is still found."""
        schedule = CronSchedule("30 6-16/4 * * 1-5")
        recent, missed = most_recent(schedule, T0, T0 + 30 * 86400)
        self.assertEqual(schedule.format(recent), "2023-12-14T14:30:00Z")
        self.assertGreater(missed, 100)

    def test_next_run_delay(self):
        """The next sync is due just after the next run time."""
        schedule = CronSchedule("*/5 * * * *")
        self.assertAlmostEqual(next_run_delay(schedule, T0, T0), 100.1, places=3)
