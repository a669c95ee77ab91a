"""The read-only demo user that HANDOFF_DEMO=1 signs every visitor in as."""

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, User


def demo_user() -> User:
    user, created = User.objects.get_or_create(username=settings.DEMO_USERNAME)
    if created:
        # No password login possible: the demo account exists only through demo mode.
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


def is_demo_user(user: AbstractBaseUser) -> bool:
    return user.is_authenticated and user.get_username() == settings.DEMO_USERNAME
