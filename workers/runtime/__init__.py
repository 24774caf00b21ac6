"""What every stage shares: process resources, the stage guard, provider retries."""
