def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: heavier statistical audits (deselect with -m 'not slow')"
    )
