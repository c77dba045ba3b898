// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// @title A plain ERC-20 for local chains.
/// @notice The devnet deploys one on each of its chains and mints it to the dev accounts, so the
/// token path of the unified balance (C40) is exercised with no real token at hand. Only its
/// deployer may mint; everything else is the ERC-20 standard and nothing more.
contract TestToken {
    string public name;
    string public symbol;
    uint8 public immutable decimals;
    uint256 public totalSupply;
    /// @notice The only account allowed to mint: the deployer.
    address public immutable minter;

    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    error NotMinter();
    error InsufficientBalance();
    error InsufficientAllowance();
    error ZeroAddress();

    constructor(string memory name_, string memory symbol_, uint8 decimals_) {
        name = name_;
        symbol = symbol_;
        decimals = decimals_;
        minter = msg.sender;
    }

    function transfer(address to, uint256 value) external returns (bool) {
        _move(msg.sender, to, value);
        return true;
    }

    function approve(address spender, uint256 value) external returns (bool) {
        allowance[msg.sender][spender] = value;
        emit Approval(msg.sender, spender, value);
        return true;
    }

    function transferFrom(address from, address to, uint256 value) external returns (bool) {
        uint256 allowed = allowance[from][msg.sender];
        if (allowed != type(uint256).max) {
            if (allowed < value) revert InsufficientAllowance();
            allowance[from][msg.sender] = allowed - value;
        }
        _move(from, to, value);
        return true;
    }

    /// @notice Creates `value` tokens for `to` (the deployer only).
    function mint(address to, uint256 value) external {
        if (msg.sender != minter) revert NotMinter();
        _mint(to, value);
    }

    /// @notice Creates `value` tokens for each of `to` in one transaction (the deployer only).
    function mintMany(address[] calldata to, uint256 value) external {
        if (msg.sender != minter) revert NotMinter();
        for (uint256 i = 0; i < to.length; i++) _mint(to[i], value);
    }

    function _mint(address to, uint256 value) private {
        if (to == address(0)) revert ZeroAddress();
        totalSupply += value;
        balanceOf[to] += value;
        emit Transfer(address(0), to, value);
    }

    function _move(address from, address to, uint256 value) private {
        if (to == address(0)) revert ZeroAddress();
        uint256 balance = balanceOf[from];
        if (balance < value) revert InsufficientBalance();
        unchecked {
            balanceOf[from] = balance - value;
        }
        balanceOf[to] += value;
        emit Transfer(from, to, value);
    }
}
