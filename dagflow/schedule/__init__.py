"""Schedules: a pipeline's `schedule:` block installed as crontab lines or as an HTCondor cron job."""
