"""corral-metad: one model of an instance's data, served to that instance only
(Ganeti's, NoCloud, OpenStack and EC2 trees) and written onto its config drive."""
