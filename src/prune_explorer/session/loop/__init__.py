"""The loop: prune, fine-tune, prune again (schedules, lottery tickets, their runs)."""

from .results import RoundResult, RunInterrupted, ScheduleRun
from .schedule import Schedule

__all__ = ["RoundResult", "RunInterrupted", "Schedule", "ScheduleRun"]
