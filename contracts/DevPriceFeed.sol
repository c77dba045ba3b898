// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// @title A price feed for local chains, read like a Chainlink AggregatorV3 feed.
/// @notice The devnet (C45) deploys one on each native chain and prices the native coin from it
/// through the gateway's `chainlink` price source (C34). Its owner sets the answer and the time
/// it was updated, so tests can also make the price stale.
contract DevPriceFeed {
    /// @notice Digits after the point in `answer` (as Chainlink's USD feeds).
    uint8 public constant decimals = 8;
    /// @notice The AggregatorV3 interface version this feed follows.
    uint256 public constant version = 4;

    /// @notice What is priced, e.g. "NAT / USD".
    string public description;
    /// @notice The only account allowed to set answers.
    address public owner;
    /// @notice The id of the newest round; rounds are numbered from 1.
    uint80 public latestRound;

    struct Round {
        int256 answer;
        uint256 startedAt;
        uint256 updatedAt;
    }

    mapping(uint80 => Round) private rounds;

    /// @notice Chainlink's event for a new answer.
    event AnswerUpdated(int256 indexed current, uint256 indexed roundId, uint256 updatedAt);
    event OwnershipTransferred(address indexed from, address indexed to);

    error NotOwner();
    error NoData();
    error ZeroOwner();

    modifier onlyOwner() {
        if (msg.sender != owner) revert NotOwner();
        _;
    }

    /// @param description_ what is priced, e.g. "NAT / USD"
    /// @param answer the first answer, with `decimals` digits after the point
    constructor(string memory description_, int256 answer) {
        owner = msg.sender;
        description = description_;
        emit OwnershipTransferred(address(0), msg.sender);
        _record(answer, block.timestamp);
    }

    /// @notice Starts a new round with `answer`, updated at `updatedAt` (unix seconds; 0: now).
    function updateAnswer(int256 answer, uint256 updatedAt) external onlyOwner {
        _record(answer, updatedAt == 0 ? block.timestamp : updatedAt);
    }

    /// @notice Hands the feed to another owner.
    function transferOwnership(address to) external onlyOwner {
        if (to == address(0)) revert ZeroOwner();
        emit OwnershipTransferred(owner, to);
        owner = to;
    }

    /// @notice The newest round, as AggregatorV3Interface.latestRoundData.
    function latestRoundData()
        external
        view
        returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound)
    {
        return getRoundData(latestRound);
    }

    /// @notice One round, as AggregatorV3Interface.getRoundData; reverts NoData for an unknown round.
    function getRoundData(uint80 roundId)
        public
        view
        returns (uint80, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound)
    {
        Round memory r = rounds[roundId];
        if (r.updatedAt == 0) revert NoData();
        return (roundId, r.answer, r.startedAt, r.updatedAt, roundId);
    }

    /// @notice The newest answer (the older AggregatorInterface).
    function latestAnswer() external view returns (int256) {
        return rounds[latestRound].answer;
    }

    /// @notice When the newest answer was set (the older AggregatorInterface).
    function latestTimestamp() external view returns (uint256) {
        return rounds[latestRound].updatedAt;
    }

    function _record(int256 answer, uint256 updatedAt) private {
        uint80 id = latestRound + 1;
        latestRound = id;
        rounds[id] = Round(answer, block.timestamp, updatedAt);
        emit AnswerUpdated(answer, id, updatedAt);
    }
}
