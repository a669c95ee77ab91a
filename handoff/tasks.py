"""Celery tasks. Kept thin: each one calls domain or store code and returns."""

import time

import redis
from celery import shared_task
from django.conf import settings

from handoff import health


@shared_task(name="handoff.tasks.heartbeat", ignore_result=True)
def heartbeat() -> None:
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        health.write_heartbeat(client, now=time.time())
    finally:
        client.close()
