"""What the e2e nodes have: inventory files of the fake backend and simulated sysfs trees."""
