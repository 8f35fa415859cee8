"""Many timers on one reactor timer (L{orchd.timing.timers})."""
